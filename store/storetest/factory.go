package storetest

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/notifytype"
)

// Factory inserts the engine's rows with sensible defaults, straight in
// SQL, for tests that need a world to act on (host/hosttest adds the
// reference host's). Options structs take zero values as "use the
// default". It bypasses every rule of the management service on purpose:
// tests of those rules go through the service.
type Factory struct {
	tb   testing.TB
	pool *pgxpool.Pool
}

var seq atomic.Int64

func next() int64 { return seq.Add(1) }

// NewFactory returns a factory writing to pool.
func NewFactory(tb testing.TB, pool *pgxpool.Pool) *Factory { return &Factory{tb: tb, pool: pool} }

// Insert runs an INSERT … RETURNING id and returns the id; a failure
// fails the test.
func (f *Factory) Insert(sql string, args ...any) int64 {
	f.tb.Helper()
	return f.id(sql, args...)
}

// Next is a number no other call of Next in the test binary returns, for
// unique names.
func Next() int64 { return next() }

func (f *Factory) id(sql string, args ...any) int64 {
	f.tb.Helper()
	var id int64
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		f.tb.Fatalf("factory: %v\n%s", err, sql)
	}
	return id
}

// ConnectionOpts describes a connection. Kind defaults to gotify; the
// secret is left unset (sealing belongs to the vault, not the factory).
type ConnectionOpts struct {
	Owner      notifytype.OwnerScope
	Kind       string
	Name       string
	AccountKey string
}

// Connection inserts a connection without a secret.
func (f *Factory) Connection(o ConnectionOpts) int64 {
	o.Kind = cmp.Or(o.Kind, "gotify")
	return f.id(`INSERT INTO switchboard.connections (owner, kind, name, account_key) VALUES ($1, $2, $3, $4) RETURNING id`,
		o.Owner.String(), o.Kind, cmp.Or(o.Name, fmt.Sprintf("conn-%d", next())),
		cmp.Or(o.AccountKey, "https://push.example.test"))
}

// SinkOpts describes a sink. Connection defaults to a new connection of the
// sink's kind in its scope; Kind to gotify; Enabled to true unless Disabled.
type SinkOpts struct {
	Owner      notifytype.OwnerScope
	Name       string
	Kind       string
	Connection int64
	Disabled   bool
	Options    string // JSON, default {}
	PerHour    int
	Burst      int
}

// Sink inserts a sink.
func (f *Factory) Sink(o SinkOpts) int64 {
	o.Kind = cmp.Or(o.Kind, "gotify")
	if o.Connection == 0 {
		o.Connection = f.Connection(ConnectionOpts{Owner: o.Owner, Kind: o.Kind})
	}
	return f.id(`INSERT INTO switchboard.sinks (owner, name, kind, connection_id, enabled, options, budget_per_hour, budget_burst)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		o.Owner.String(), cmp.Or(o.Name, fmt.Sprintf("sink-%d", next())), o.Kind, o.Connection, !o.Disabled,
		cmp.Or(o.Options, "{}"), cmp.Or(o.PerHour, 30), cmp.Or(o.Burst, 10))
}

// SubscriptionOpts describes a subscription. Owner defaults to the sink's.
type SubscriptionOpts struct {
	Sink           int64
	EventTypes     []notifytype.EventType
	Queues         []int64
	Endpoints      []int64
	Webhooks       []int64
	MinSeverity    notifytype.Severity
	IncludeExcerpt bool
}

// Subscription inserts a subscription.
func (f *Factory) Subscription(o SubscriptionOpts) int64 {
	types := make([]string, len(o.EventTypes))
	for i, t := range o.EventTypes {
		types[i] = string(t)
	}
	return f.id(`INSERT INTO switchboard.subscriptions (sink_id, owner, event_types, queue_ids, endpoint_ids, webhook_ids, min_severity_rank, include_excerpt)
		SELECT $1, owner, $2, $3, $4, $5, $6, $7 FROM switchboard.sinks WHERE id = $1 RETURNING id`,
		o.Sink, types, nonNil(o.Queues), nonNil(o.Endpoints), nonNil(o.Webhooks),
		max(cmp.Or(o.MinSeverity, notifytype.SeverityLow).Rank(), 0), o.IncludeExcerpt)
}

func nonNil(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

// Count returns the result of a count query, for assertions.
func (f *Factory) Count(sql string, args ...any) int {
	f.tb.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.tb.Fatalf("factory: count: %v\n%s", err, sql)
	}
	return n
}

// Exec runs a statement; a failure fails the test.
func (f *Factory) Exec(sql string, args ...any) {
	f.tb.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.tb.Fatalf("factory: %v\n%s", err, sql)
	}
}

// InTx runs fn in a transaction that commits when fn returns nil.
func (f *Factory) InTx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), f.pool, fn)
}
