package repeats

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

var table = struct {
	sync.Mutex
	events, rows, attempts, lost, dups int
	figures                            []string
}{}

// TestMain runs the scenario, then writes its row.
func TestMain(m *testing.M) {
	code := m.Run()
	table.Lock()
	row := faults.Row{
		Scenario: "3c. repeats during claims (3 engines, failing sinks)",
		Load: fmt.Sprintf("%d events on %d keys of 4 sinks (2 with the default budget), %d rows, %d attempts",
			table.events, keys, table.rows, table.attempts),
		Faults: "a repeat of each key sent while its row's attempt is in flight; " +
			"those attempts answered 500, the next one 200",
		BadInputs: faults.NotApplicable, RowsLost: table.lost, Duplicates: table.dups, SecretsFound: faults.NotApplicable,
		Figures: table.figures,
		Failed:  code != 0,
	}
	table.Unlock()
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

const (
	keys   = 24
	sinksN = 4
	// failing is how many attempts of each key fail, each with a repeat
	// of the key emitted while it is in flight.
	failing = 2
)

// receiver is one sink's server: the n-th request of a key (the key is in
// the message's title) emits a repeat of that key while the attempt is in
// flight, and fails, for n up to failing; later ones succeed.
type receiver struct {
	mu        sync.Mutex
	requests  map[int]int // key → requests seen
	delivered map[int]int // key → requests answered 200
	repeat    func(key int) error
	errs      []error
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct{ Title, Message string }
	_ = json.Unmarshal(body, &m)
	key := -1
	if _, after, ok := strings.Cut(m.Title+" "+m.Message, "key-"); ok {
		_, _ = fmt.Sscanf(after, "%d", &key)
	}
	rc.mu.Lock()
	rc.requests[key]++
	n := rc.requests[key]
	rc.mu.Unlock()
	if key >= 0 && n <= failing {
		if err := rc.repeat(key); err != nil {
			rc.mu.Lock()
			rc.errs = append(rc.errs, err)
			rc.mu.Unlock()
		}
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rc.mu.Lock()
	rc.delivered[key]++
	rc.mu.Unlock()
	_, _ = w.Write([]byte(`{"id": 1}`))
}

func TestRepeatsDuringClaims(t *testing.T) {
	w := hosttest.NewWorld(t)
	_, p, scope := w.Human()
	var engines []*engine.Engine
	for range 3 {
		eng, _ := w.Start(func(c *engine.Config) {
			c.BudgetPerHourMax, c.BudgetBurstMax = faults.LiftedPerHour, faults.LiftedBurst
		})
		engines = append(engines, eng)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.TableJSON("outbox", "payload"))
		}
	})

	event := func(key int) engine.Event {
		return engine.Event{
			Type: host.EventRuleNotify, Owner: scope, WebhookID: 7,
			Subject: host.RuleSubject(1, fmt.Sprintf("forge#%d", key), int64(key+1)),
			Content: sinks.Content{Title: fmt.Sprintf("key-%d build red", key), Place: "forge"},
		}
	}
	sinkOf := make(map[int]int64, keys)
	emitted := 0
	var emitMu sync.Mutex
	emit := func(key int) error {
		emitMu.Lock()
		defer emitMu.Unlock()
		return pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
			ok, err := engines[key%len(engines)].EmitToSink(w.Ctx, tx, sinkOf[key], event(key))
			if err == nil && !ok {
				err = fmt.Errorf("key %d: the sink took nothing", key)
			}
			if err == nil {
				emitted++
			}
			return err
		})
	}
	receivers := make([]*receiver, sinksN)
	for i := range receivers {
		receivers[i] = &receiver{requests: map[int]int{}, delivered: map[int]int{}, repeat: emit}
		srv := sinktest.NewServer(t, receivers[i].ServeHTTP)
		o := enginetest.SinkOpts{BaseURL: srv.URL, Secret: fmt.Sprintf("gtfya.repeats%d", i),
			Events: []notifytype.EventType{host.EventRuleNotify}}
		if i%2 == 0 {
			// Half the sinks may send as much as they are given: their rows
			// go back to pending after a failure. The others keep the
			// default budget, and their rows are held once it is spent.
			o.PerHour, o.Burst = faults.LiftedPerHour, faults.LiftedBurst
		}
		sink := w.Sink(engines[i%len(engines)], p, scope, o)
		for key := i; key < keys; key += sinksN {
			sinkOf[key] = sink
		}
	}
	for key := range keys {
		require.NoError(t, emit(key))
	}

	// Drain: let the engines settle at the fake clock's present, then move
	// it to the next due row, until every row is finished.
	for round := 0; ; round++ {
		require.Less(t, round, 200, "the outbox never drained: %s", w.TableJSON("outbox", "payload"))
		_, err := w.Settle()
		require.NoError(t, err)
		var open int
		var due *time.Time
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*), min(due_at) FROM switchboard.outbox
			WHERE state IN ('pending', 'held', 'claimed')`).Scan(&open, &due))
		if open == 0 {
			break
		}
		if due != nil && due.After(w.Clock.Now()) {
			w.Clock.Advance(due.Sub(w.Clock.Now()))
		}
	}

	var rows, delivered, events, maxAttempts int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'delivered'),
		coalesce(sum(delivered_count) FILTER (WHERE state = 'delivered'), 0), coalesce(max(attempts), 0) FROM switchboard.outbox`).
		Scan(&rows, &delivered, &events, &maxAttempts))
	var attempts int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM switchboard.delivery_records`).Scan(&attempts))
	// A sink sees a row twice when it answers 200 for more rows of a key
	// than the outbox holds delivered.
	perKey := map[int]int{}
	crows, err := w.Pool.Query(w.Ctx, `SELECT dedup_key, count(*) FROM switchboard.outbox WHERE state = 'delivered' GROUP BY 1`)
	require.NoError(t, err)
	for crows.Next() {
		var dedup string
		var n int
		require.NoError(t, crows.Scan(&dedup, &n))
		_, subject, _ := strings.Cut(dedup, "forge#")
		var key int
		_, err := fmt.Sscanf(subject, "%d", &key)
		require.NoError(t, err, "dedup key %q", dedup)
		perKey[key] += n
	}
	require.NoError(t, crows.Err())
	dups, sent := 0, 0
	for _, rc := range receivers {
		require.Empty(t, rc.errs, "emitting a repeat during an attempt")
		for key, n := range rc.delivered {
			sent += n
			if key >= 0 && n > perKey[key] { // key -1: a budget summary
				dups += n - perKey[key]
			}
		}
	}
	var dropped int64
	for _, eng := range engines {
		dropped += eng.OutcomesDropped()
	}

	table.Lock()
	table.events, table.rows, table.attempts = emitted, rows, attempts
	table.lost = emitted - events
	table.dups = dups
	table.figures = append(table.figures,
		fmt.Sprintf("%d events (%d repeats sent during their row's attempt) reached their sinks as %d messages "+
			"(%d rows delivered: repeats as \"and N more\", held rows in budget summaries); "+
			"%d outcomes dropped; at most %d attempts a row", events, emitted-keys, sent, delivered, dropped, maxAttempts))
	table.Unlock()

	require.Greater(t, emitted, keys+keys/2, "repeats arrived while their rows were claimed")
	require.Equal(t, rows, delivered, "every row delivered")
	require.Equal(t, emitted, events, "every event reached its sink")
	require.Zero(t, dups, "no sink saw a row twice")
	require.Zero(t, dropped, "no outcome was given up")
	require.LessOrEqual(t, maxAttempts, 7)
	require.NotContains(t, w.Logs.String(), "error recording")
	require.NotContains(t, w.Logs.String(), "SQLSTATE 23505")
}
