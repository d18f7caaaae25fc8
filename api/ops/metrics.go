package ops

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/notify/engine"
)

// Metrics are the engine's Prometheus metrics, on a private registry.
type Metrics struct {
	Registry *prometheus.Registry

	attempts *prometheus.CounterVec
	claimLag prometheus.Histogram
	statusFn func() []engine.SinkStatus
	pool     *pgxpool.Pool

	// OutcomesDropped, when set, feeds switchboard_outcomes_dropped_total
	// (engine.Engine.OutcomesDropped).
	OutcomesDropped func() int64
}

// NewMetrics builds the metrics; status and pool feed the gauges read at
// scrape time (actor status, outbox depth).
func NewMetrics(pool *pgxpool.Pool, status func() []engine.SinkStatus) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_delivery_attempts_total",
			Help: "Delivery attempts by the state they left their rows in and their error class (empty when delivered).",
		}, []string{"state", "class"}),
		claimLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_claim_latency_seconds",
			Help:    "How late a row was when the claimer handed it to its sink's actor (now minus due time).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		statusFn: status,
		pool:     pool,
	}
	m.Registry.MustRegister(m.attempts, m.claimLag, m, prometheus.NewGoCollector())
	return m
}

// OnAttempt is engine.Config.OnAttempt.
func (m *Metrics) OnAttempt(a engine.Attempt) {
	m.attempts.WithLabelValues(a.State, string(a.Class)).Inc()
}

// OnClaim is engine.Config.OnClaim.
func (m *Metrics) OnClaim(_ int64, lag time.Duration) { m.claimLag.Observe(max(lag, 0).Seconds()) }

var (
	heldDesc    = prometheus.NewDesc("switchboard_sink_held_rows", "Rows held by a sink's empty budget, per active actor.", []string{"sink_id"}, nil)
	tokensDesc  = prometheus.NewDesc("switchboard_sink_tokens", "Tokens in a sink's budget as its actor mirrors it (-1 before its first reservation).", []string{"sink_id"}, nil)
	restartDesc = prometheus.NewDesc("switchboard_sink_actor_restarts", "Restarts of a sink's actor after a panic.", []string{"sink_id"}, nil)
	depthDesc   = prometheus.NewDesc("switchboard_outbox_rows", "Outbox rows by state.", []string{"state"}, nil)
	actorsDesc  = prometheus.NewDesc("switchboard_sink_actors", "Active sink actors on this instance.", nil, nil)
	droppedDesc = prometheus.NewDesc("switchboard_outcomes_dropped_total",
		"Delivery outcomes this instance could not write and gave up (each logged); their rows are sent again when their claims expire.", nil, nil)
)

// Describe implements prometheus.Collector for the scrape-time gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldDesc
	ch <- tokensDesc
	ch <- restartDesc
	ch <- depthDesc
	ch <- actorsDesc
	ch <- droppedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	status := m.statusFn()
	ch <- prometheus.MustNewConstMetric(actorsDesc, prometheus.GaugeValue, float64(len(status)))
	if m.OutcomesDropped != nil {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(m.OutcomesDropped()))
	}
	for _, s := range status {
		id := strconv.FormatInt(s.SinkID, 10)
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(s.Held), id)
		ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.GaugeValue, s.Tokens, id)
		ch <- prometheus.MustNewConstMetric(restartDesc, prometheus.GaugeValue, float64(s.Restarts), id)
	}
	if m.pool == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := m.pool.Query(ctx, `SELECT state, count(*) FROM switchboard.outbox GROUP BY state`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(depthDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(depthDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(n), state)
	}
}
