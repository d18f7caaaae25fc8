package storetest

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Factory inserts rows with sensible defaults, straight in SQL, for tests
// that need a world to act on. Options structs take zero values as "use the
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

func (f *Factory) id(sql string, args ...any) int64 {
	f.tb.Helper()
	var id int64
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		f.tb.Fatalf("factory: %v\n%s", err, sql)
	}
	return id
}

// Human inserts a human and returns its id.
func (f *Factory) Human(name string) int64 {
	n := next()
	name = cmp.Or(name, fmt.Sprintf("human-%d", n))
	return f.id(`INSERT INTO humans (name, email) VALUES ($1, $2) RETURNING id`, name, fmt.Sprintf("h%d@example.test", n))
}

// Team inserts a team and returns its id.
func (f *Factory) Team(name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("team-%d", next()))
	return f.id(`INSERT INTO teams (name) VALUES ($1) RETURNING id`, name)
}

// Member adds a human to a team with a role ("owner", "admin", "member").
func (f *Factory) Member(teamID, humanID int64, role string) {
	f.tb.Helper()
	if _, err := f.pool.Exec(context.Background(),
		`INSERT INTO team_members (team_id, human_id, role) VALUES ($1, $2, $3)`, teamID, humanID, role); err != nil {
		f.tb.Fatalf("factory: member: %v", err)
	}
}

// EndpointOpts describes an endpoint. Human defaults to a new human; Grants
// to the default grant {todos, rules}.
type EndpointOpts struct {
	Owner  notifytype.OwnerScope
	Human  int64
	Name   string
	Grants []string
}

// Endpoint inserts an endpoint with a random credential hash.
func (f *Factory) Endpoint(o EndpointOpts) int64 {
	n := next()
	if o.Human == 0 {
		o.Human = f.Human("")
	}
	if o.Owner.IsZero() {
		o.Owner = hostid.Human(o.Human)
	}
	if o.Grants == nil {
		o.Grants = []string{"todos", "rules"}
	}
	return f.id(`INSERT INTO endpoints (owner, name, accountable_human_id, grants, credential_hash)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`,
		o.Owner.String(), cmp.Or(o.Name, fmt.Sprintf("endpoint-%d", n)), o.Human, o.Grants, []byte(fmt.Sprintf("hash-%d", n)))
}

// Queue inserts a queue.
func (f *Factory) Queue(owner notifytype.OwnerScope, name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("queue-%d", next()))
	return f.id(`INSERT INTO queues (owner, name) VALUES ($1, $2) RETURNING id`, owner.String(), name)
}

// Webhook inserts a webhook.
func (f *Factory) Webhook(owner notifytype.OwnerScope, name string) int64 {
	name = cmp.Or(name, fmt.Sprintf("webhook-%d", next()))
	return f.id(`INSERT INTO webhooks (owner, name) VALUES ($1, $2) RETURNING id`, owner.String(), name)
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

// TodoOpts describes a todo. Owner defaults to the queue's; Title to a
// generated one; AttemptCap to 3.
type TodoOpts struct {
	Queue      int64
	Title      string
	Payload    string // JSON, default {}
	AttemptCap int
	LeaseTTL   int // seconds, default 300
}

// Todo inserts a pending todo.
func (f *Factory) Todo(o TodoOpts) int64 {
	return f.id(`INSERT INTO todos (queue_id, owner, title, payload, attempt_cap, lease_ttl_secs)
		SELECT $1, owner, $2, $3, $4, $5 FROM queues WHERE id = $1 RETURNING id`,
		o.Queue, cmp.Or(o.Title, fmt.Sprintf("todo %d", next())), cmp.Or(o.Payload, "{}"),
		cmp.Or(o.AttemptCap, 3), cmp.Or(o.LeaseTTL, 300))
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

// InTx runs fn in a transaction that commits when fn returns nil.
func (f *Factory) InTx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), f.pool, fn)
}
