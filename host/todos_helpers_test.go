package host_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// fakeClock is a clock the test moves by hand.
type fakeClock = clockwork.FakeClock

// testStart is every fake clock's start: the real now when the test binary
// starts, the same for every world, so two worlds that take the same steps
// store the same instants.
var testStart = time.Now().UTC().Truncate(time.Second)

func newFakeClock() *fakeClock {
	return clockwork.NewFakeClockAt(testStart)
}

// recorder remembers every event the host asks to emit, then lets the real
// engine emit it.
type recorder struct {
	inner  host.Emitter
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) Emit(ctx context.Context, tx pgx.Tx, ev engine.Event) error {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return r.inner.Emit(ctx, tx, ev)
}

func (r *recorder) Events() []engine.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Event(nil), r.events...)
}

// todoWorld is one database with the real engine and the host's todos.
type todoWorld struct {
	pool   *pgxpool.Pool
	f      *hosttest.Factory
	clock  *fakeClock
	engine *engine.Engine
	rec    *recorder
	todos  *host.Todos
}

func newTodoWorld(t *testing.T) (*todoWorld, context.Context) {
	t.Helper()
	return newTodoWorldOn(t, hosttest.New(t), newFakeClock()), context.Background()
}

func newTodoWorldOn(t *testing.T, pool *pgxpool.Pool, clock *fakeClock) *todoWorld {
	t.Helper()
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(), Clock: clock}, clock))
	require.NoError(t, err)
	rec := &recorder{inner: eng}
	return &todoWorld{
		pool:   pool,
		f:      hosttest.NewFactory(t, pool),
		clock:  clock,
		engine: eng,
		rec:    rec,
		todos:  host.NewTodos(pool, rec, clock),
	}
}

// person is a human with a personal endpoint and a personal queue.
type person struct {
	human, endpoint, queue int64
	scope                  notifytype.OwnerScope
}

func (w *todoWorld) person(t *testing.T, queueName string) person {
	t.Helper()
	h := w.f.Human("")
	scope := hostid.Human(h)
	return person{
		human:    h,
		endpoint: w.f.Endpoint(hosttest.EndpointOpts{Human: h}),
		queue:    w.f.Queue(scope, queueName),
		scope:    scope,
	}
}

// subscribedSink makes a sink of owner subscribed to types (filtered by
// opts' filters, if any) and returns its id.
func (w *todoWorld) subscribedSink(owner notifytype.OwnerScope, opts storetest.SubscriptionOpts, types ...notifytype.EventType) int64 {
	sink := w.f.Sink(storetest.SinkOpts{Owner: owner})
	opts.Sink = sink
	opts.EventTypes = types
	w.f.Subscription(opts)
	return sink
}

func (w *todoWorld) enqueue(t *testing.T, ctx context.Context, queue int64, in host.TodoInput) host.Todo {
	t.Helper()
	if in.Title == "" {
		in.Title = "fix the build"
	}
	todo, err := w.todos.Enqueue(ctx, queue, in)
	require.NoError(t, err)
	return todo
}

func (w *todoWorld) claim(t *testing.T, ctx context.Context, endpoint, queue int64, opts ...host.ClaimOpts) host.Todo {
	t.Helper()
	todo, ok, err := w.todos.Claim(ctx, endpoint, queue, opts...)
	require.NoError(t, err)
	require.True(t, ok, "queue %d has a pending todo", queue)
	return todo
}

// failToDeath claims and fails the queue's next todo until it dead-letters.
func (w *todoWorld) failToDeath(t *testing.T, ctx context.Context, endpoint, queue int64) host.Todo {
	t.Helper()
	for {
		todo := w.claim(t, ctx, endpoint, queue)
		todo, err := w.todos.Fail(ctx, endpoint, todo.ID, host.AttemptReport{Summary: "tests still red"})
		require.NoError(t, err)
		if todo.State == host.TodoDead {
			return todo
		}
	}
}

type outboxRow struct {
	SinkID    int64
	Owner     string
	EventType string
	DedupKey  string
}

func (w *todoWorld) outbox(t *testing.T) []outboxRow {
	t.Helper()
	// Events become outbox rows when a claimer fans them out: do it now.
	_, err := testhooks.FanOut(context.Background(), w.engine)
	require.NoError(t, err)
	rows, err := w.pool.Query(context.Background(),
		`SELECT sink_id, owner, event_type, coalesce(dedup_key, '') FROM switchboard.outbox ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[outboxRow])
	require.NoError(t, err)
	return out
}

// row returns one row of a table as column → value, for column-by-column
// comparison.
func row(t *testing.T, db *pgxpool.Pool, sql string, args ...any) map[string]any {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	m, err := pgx.CollectExactlyOneRow(rows, pgx.RowToMap)
	require.NoError(t, err)
	return m
}

func allRows(t *testing.T, db *pgxpool.Pool, sql string, args ...any) []map[string]any {
	t.Helper()
	rows, err := db.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	ms, err := pgx.CollectRows(rows, pgx.RowToMap)
	require.NoError(t, err)
	return ms
}

func requireCode(t *testing.T, err error, code notifytype.Code, field string) {
	t.Helper()
	require.Error(t, err)
	e, ok := notifytype.AsError(err)
	require.True(t, ok, "want a %s error, got %v", code, err)
	require.Equal(t, code, e.Code, err.Error())
	require.Equal(t, field, e.Field, err.Error())
}
