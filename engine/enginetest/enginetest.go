// Package enginetest builds worlds for tests of the delivery engine: a
// database with the engine's tables, engines on it driven by one fake
// clock, and sinks pointed at httptest servers on loopback (allowed over
// plain HTTP through the operator's opt-ins, as an operator would allow a
// local receiver). It knows no host: a world's embedder (World.Embed,
// World.NewHuman) is the test's to give; host/hosttest gives the
// reference host's.
//
// Tests wait on attempts through Attempts, which every engine of the world
// feeds from Config.OnAttempt: no sleeps.
package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// Start is the fake clock's starting time: the real now when the test binary
// starts, so a test passes on any day it is run (sessions, leases and
// retention windows compared against the database's clock stay valid).
var Start = time.Now().UTC().Truncate(time.Second)

// WaitTimeout bounds how long (wall time) a test waits for an attempt.
const WaitTimeout = 20 * time.Second

// World is one database with engines on it.
type World struct {
	Ctx      context.Context
	Pool     *pgxpool.Pool
	URL      string
	F        *storetest.Factory
	Clock    *clockwork.FakeClock
	Key      []byte
	Attempts chan engine.Attempt
	// Logs holds every log line of every engine of the world, as JSON.
	Logs *SyncBuffer
	// Embed, when set, configures each engine of the world as its
	// embedder would (Directory, Events, Links, HostCleanUp), before the
	// test's own configure functions.
	Embed func(pool *pgxpool.Pool, cfg *engine.Config)
	// NewHuman, when set, makes the humans Human returns (in the
	// embedder's own tables); by default Human returns SoleOwner.
	NewHuman func() (int64, engine.Principal, notifytype.OwnerScope)

	tb testing.TB
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// New builds a world on a fresh database with the engine's tables.
func New(tb testing.TB) *World {
	tb.Helper()
	return NewOn(tb, storetest.URL(tb))
}

// NewOn builds a world on the database at url, which has the engine's
// tables (and, say, an embedder's).
func NewOn(tb testing.TB, url string) *World {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &World{
		Ctx: context.Background(), Pool: pool, URL: url, F: storetest.NewFactory(tb, pool),
		Clock: clockwork.NewFakeClockAt(Start), Key: key,
		Attempts: make(chan engine.Attempt, 100_000), Logs: &SyncBuffer{}, tb: tb,
	}
}

// Config is the engine configuration the world's engines share; configure
// edits it further.
func (w *World) Config(pool *pgxpool.Pool, configure ...func(*engine.Config)) engine.Config {
	cfg := engine.Config{
		Pool:           pool,
		SecretKey:      w.Key,
		BaseURL:        "https://switchboard.example.net",
		PushAllowHTTP:  true,
		PrivateHosts:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Clock:          w.Clock,
		PollInterval:   20 * time.Millisecond,
		NotifyDebounce: -1,
		Logger:         slog.New(slog.NewJSONHandler(w.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnAttempt:      func(a engine.Attempt) { w.Attempts <- a },
	}
	if w.Embed != nil {
		w.Embed(pool, &cfg)
	}
	testhooks.SetDatabaseClock(&cfg, w.Clock)
	for _, c := range configure {
		c(&cfg)
	}
	return cfg
}

// Engine builds an engine on the world's pool without serving it.
func (w *World) Engine(configure ...func(*engine.Config)) *engine.Engine {
	w.tb.Helper()
	eng, err := engine.New(w.Config(w.Pool, configure...))
	require.NoError(w.tb, err)
	return eng
}

// Serve builds an engine on a pool of its own (as another instance would
// have) and serves it until the test ends.
func (w *World) Serve(configure ...func(*engine.Config)) *engine.Engine {
	w.tb.Helper()
	return w.ServeWith(nil, configure...)
}

// ServeWith is Serve, calling prepare (when not nil) on the engine before
// it serves: the place for test hooks such as WrapAdapters, which
// must be set before Serve.
func (w *World) ServeWith(prepare func(*engine.Engine), configure ...func(*engine.Config)) *engine.Engine {
	w.tb.Helper()
	pool, err := pgxpool.New(context.Background(), w.URL)
	require.NoError(w.tb, err)
	eng, err := engine.New(w.Config(pool, configure...))
	require.NoError(w.tb, err)
	if prepare != nil {
		prepare(eng)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	w.tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			w.tb.Errorf("engine stopped with: %v", err)
		}
		w.closePool(pool)
	})
	return eng
}

// closePool closes an engine's pool once the engine has stopped, giving
// up after WaitTimeout with the reason: pgxpool.Close waits for every
// connection to come back, and one still held by work a stop left running
// would otherwise hang the test until go test's own timeout swallowed the
// failure (issue 23, item 9).
func (w *World) closePool(pool *pgxpool.Pool) {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	t := time.NewTimer(WaitTimeout)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
		w.tb.Errorf("an engine's pool did not close within %v of its stop: %d connections still held by work the stop left running",
			WaitTimeout, pool.Stat().AcquiredConns())
	}
}

// Wait returns the next attempt, failing the test after WaitTimeout.
func (w *World) Wait() engine.Attempt {
	w.tb.Helper()
	select {
	case a := <-w.Attempts:
		return a
	case <-time.After(WaitTimeout):
		w.tb.Fatalf("no delivery attempt within %v\n%s", WaitTimeout, w.stateForFailure())
		return engine.Attempt{}
	}
}

// stateForFailure describes what a test waiting for an attempt may need
// to know of why none came: the outbox rows by state and holder, each
// instance's heartbeat against the database's clock, and the engines'
// last warnings and errors.
func (w *World) stateForFailure() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var b strings.Builder
	rows, err := w.Pool.Query(ctx, `
		SELECT format('%s by %s: %s rows', state, coalesce(claimed_by, 'nobody'), count(*))
		FROM switchboard.outbox GROUP BY state, claimed_by ORDER BY state, claimed_by`)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	fmt.Fprintf(&b, "outbox: %s (%v)\n", strings.Join(lines, "; "), err)
	rows, err = w.Pool.Query(ctx, `
		SELECT format('%s may dispatch for %s, alive for %s', name, dispatch_until - now(), alive_until - now())
		FROM switchboard.outbox_instances ORDER BY name`)
	lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
	fmt.Fprintf(&b, "heartbeats: %s (%v)\n", strings.Join(lines, "; "), err)
	var logged []string
	for line := range strings.Lines(w.Logs.String()) {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			logged = append(logged, line)
		}
	}
	fmt.Fprintf(&b, "last warnings and errors of %d:\n%s", len(logged), strings.Join(logged[max(len(logged)-20, 0):], ""))
	return b.String()
}

// WaitN returns the next n attempts, in the order they were reported.
func (w *World) WaitN(n int) []engine.Attempt {
	w.tb.Helper()
	out := make([]engine.Attempt, 0, n)
	for range n {
		out = append(out, w.Wait())
	}
	return out
}

// WaitFor returns the first attempt for which ok is true, dropping others.
func (w *World) WaitFor(ok func(engine.Attempt) bool) engine.Attempt {
	w.tb.Helper()
	deadline := time.After(WaitTimeout)
	for {
		select {
		case a := <-w.Attempts:
			if ok(a) {
				return a
			}
		case <-deadline:
			w.tb.Fatalf("no matching delivery attempt within %v", WaitTimeout)
			return engine.Attempt{}
		}
	}
}

// Human returns a human's id, principal and scope: a new one from
// NewHuman when the world has it, else the sole owner of an engine
// without a Directory (engine.SoleOwner).
func (w *World) Human() (int64, engine.Principal, notifytype.OwnerScope) {
	if w.NewHuman != nil {
		return w.NewHuman()
	}
	return 1, engine.HumanPrincipal(engine.SoleOwner.ID), engine.SoleOwner
}

// SinkOpts describes a sink made through the management service.
type SinkOpts struct {
	Kind    string // gotify (default) or apprise
	BaseURL string
	// Secret is the Gotify token or the Apprise secret JSON.
	Secret  string
	Options any // marshalled to JSON
	PerHour int
	Burst   int
	// Events subscribed; default todo.dead_lettered.
	Events         []notifytype.EventType
	IncludeExcerpt bool
}

// Sink creates a connection, a sink and a subscription through eng's
// management service and returns the sink id.
func (w *World) Sink(eng *engine.Engine, p engine.Principal, owner notifytype.OwnerScope, o SinkOpts) int64 {
	w.tb.Helper()
	if o.Kind == "" {
		o.Kind = engine.KindGotify
	}
	if o.Events == nil {
		o.Events = []notifytype.EventType{"todo.dead_lettered"}
	}
	c, err := eng.CreateConnection(w.Ctx, p, engine.ConnectionInput{
		Owner: owner, Kind: o.Kind, Name: "conn-" + rand.Text()[:8], BaseURL: o.BaseURL,
		Secret: notifytype.NewSecret(o.Secret),
	})
	require.NoError(w.tb, err)
	var opts json.RawMessage
	if o.Options != nil {
		opts, err = json.Marshal(o.Options)
		require.NoError(w.tb, err)
	}
	s, err := eng.CreateSink(w.Ctx, p, engine.SinkInput{
		Owner: owner, Name: "sink-" + rand.Text()[:8], Kind: o.Kind, ConnectionID: c.ID, Options: opts,
		BudgetPerHour: o.PerHour, BudgetBurst: o.Burst,
	})
	require.NoError(w.tb, err)
	_, err = eng.AddSubscription(w.Ctx, p, s.ID, engine.SubscriptionInput{EventTypes: o.Events, IncludeExcerpt: o.IncludeExcerpt})
	require.NoError(w.tb, err)
	return s.ID
}

// Emit emits ev through eng in a transaction of its own and fans it out,
// so that its outbox rows exist when Emit returns.
func (w *World) Emit(eng *engine.Engine, ev engine.Event) {
	w.tb.Helper()
	require.NoError(w.tb, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error { return eng.Emit(w.Ctx, tx, ev) }))
	w.FanOut(eng)
}

// FanOut fans out every committed event through eng and returns once none
// is left, including those a serving engine's claimer had taken: an event
// stays visible until the fan-out that took it commits.
func (w *World) FanOut(eng *engine.Engine) {
	w.tb.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		_, err := testhooks.FanOut(w.Ctx, eng)
		require.NoError(w.tb, err)
		var left int
		require.NoError(w.tb, w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM switchboard.outbox_events`).Scan(&left))
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.tb.Fatalf("%d events still not fanned out after %v", left, WaitTimeout)
		}
	}
}

// RowStates counts outbox rows by state.
func (w *World) RowStates() map[string]int {
	w.tb.Helper()
	rows, err := w.Pool.Query(w.Ctx, `SELECT state, count(*) FROM switchboard.outbox GROUP BY state`)
	require.NoError(w.tb, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(w.tb, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(w.tb, rows.Err())
	return out
}

// Helpers for property tests, which reuse one world across many checks:
// engines that stop when a check ends, a reset between checks, and waits
// that report a timeout to the caller instead of failing the test (a rapid
// check fails through its own *rapid.T so that rapid can shrink).

// Start builds an engine on a pool of its own (as another instance would
// have) and serves it until stop is called or the test ends. stop waits for
// the engine to return and closes its pool; it may be called more than
// once.
func (w *World) Start(configure ...func(*engine.Config)) (eng *engine.Engine, stop func()) {
	w.tb.Helper()
	pool, err := pgxpool.New(context.Background(), w.URL)
	require.NoError(w.tb, err)
	eng, err = engine.New(w.Config(pool, configure...))
	require.NoError(w.tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				w.tb.Errorf("engine stopped with: %v", err)
			}
			w.closePool(pool)
		})
	}
	w.tb.Cleanup(stop)
	return eng, stop
}

// Reset empties what a property check writes (outbox rows and their
// repeats, delivery records, subscriptions, sinks, connections: every
// table, whatever owner scope) and drops
// the attempts still queued, so the next check starts from nothing. Stop
// the check's engines first, or reset while they are idle.
func (w *World) Reset() error {
	var err error
	for range 5 {
		// DELETE is much quicker than TRUNCATE on tables this small; a
		// table of another feature that references these falls back to
		// TRUNCATE … CASCADE. An engine still at work (a check that failed
		// half way) may deadlock with either; PostgreSQL aborts one of the
		// two, and we go again.
		_, err = w.Pool.Exec(w.Ctx, `DELETE FROM switchboard.outbox; DELETE FROM switchboard.outbox_events; DELETE FROM switchboard.delivery_records;
			DELETE FROM switchboard.subscriptions; DELETE FROM switchboard.sinks; DELETE FROM switchboard.connections`)
		if err != nil {
			_, err = w.Pool.Exec(w.Ctx, `TRUNCATE switchboard.outbox, switchboard.outbox_events, switchboard.delivery_records, switchboard.subscriptions, switchboard.sinks, switchboard.connections CASCADE`)
		}
		if err == nil {
			break
		}
	}
	for {
		select {
		case <-w.Attempts:
		default:
			return err
		}
	}
}

// NextAttempt returns the next attempt, or ok false when none came within
// timeout (wall time).
func (w *World) NextAttempt(timeout time.Duration) (a engine.Attempt, ok bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-w.Attempts:
		return a, true
	case <-t.C:
		return engine.Attempt{}, false
	}
}

// settleTick is how long Settle waits for an attempt before it looks at the
// database again: a flush that finds no token reschedules its held rows
// without an attempt to report.
const settleTick = 25 * time.Millisecond

// Settle waits until the engines have nothing to do at the fake clock's
// present: no row is claimed, and none is pending or held with its due time
// reached. It returns the attempts that arrived meanwhile (an attempt is
// reported just after its rows are recorded, so one may still arrive after
// Settle returns), or an error after WaitTimeout.
func (w *World) Settle() ([]engine.Attempt, error) { return w.SettleWithin(WaitTimeout) }

// SettleWithin is Settle giving up after timeout (wall time) instead of
// WaitTimeout.
func (w *World) SettleWithin(timeout time.Duration) ([]engine.Attempt, error) {
	deadline := time.Now().Add(timeout)
	var seen []engine.Attempt
	for {
		var busy int
		err := w.Pool.QueryRow(w.Ctx, `
			SELECT (SELECT count(*) FROM switchboard.outbox_events) + (SELECT count(*) FROM switchboard.outbox
			WHERE state = 'claimed' OR (state IN ('pending', 'held') AND due_at <= $1))`, w.Clock.Now()).Scan(&busy)
		if err != nil {
			return seen, fmt.Errorf("error reading outbox: %w", err)
		}
		if busy == 0 {
			return seen, nil
		}
		if time.Now().After(deadline) {
			return seen, fmt.Errorf("%d outbox rows still due or claimed after %v at %v: %s",
				busy, timeout, w.Clock.Now().Format(time.RFC3339Nano), w.describeOutbox())
		}
		if a, ok := w.NextAttempt(settleTick); ok {
			seen = append(seen, a)
		}
	}
}

// TableJSON returns every row of table as JSON (to_jsonb), one row a line,
// without the columns named in omit: for checks that no stored value
// carries a secret.
func (w *World) TableJSON(table string, omit ...string) string {
	w.tb.Helper()
	if omit == nil {
		omit = []string{}
	}
	var dump string
	require.NoError(w.tb, w.Pool.QueryRow(w.Ctx,
		`SELECT coalesce(string_agg((to_jsonb(t) - $1::text[])::text, E'\n'), '') FROM `+
			storetest.Table(table)+` t`, omit).Scan(&dump))
	return dump
}

// Tables lists the database's tables.
func (w *World) Tables() []string {
	w.tb.Helper()
	rows, err := w.Pool.Query(w.Ctx, storetest.TablesQuery)
	require.NoError(w.tb, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(w.tb, err)
	return tables
}

// describeOutbox lists the outbox rows not yet finished, for failure
// messages.
func (w *World) describeOutbox() string {
	rows, err := w.Pool.Query(w.Ctx, `
		SELECT id, sink_id, state, attempts, due_at, coalesce(claimed_by, ''), claim_expires_at
		FROM switchboard.outbox WHERE state IN ('pending', 'held', 'claimed') ORDER BY id`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b bytes.Buffer
	for rows.Next() {
		var (
			id, sink        int64
			state, claimant string
			attempts        int
			due             time.Time
			expires         *time.Time
		)
		if err := rows.Scan(&id, &sink, &state, &attempts, &due, &claimant, &expires); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "\n  row %d sink %d %s attempts %d due %s", id, sink, state, attempts, due.UTC().Format(time.RFC3339Nano))
		if expires != nil {
			fmt.Fprintf(&b, " claimed by %s until %s", claimant, expires.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.String()
}

// skewed is the real clock off by a fixed amount.
type skewed struct {
	clockwork.Clock
	by time.Duration
}

func (c skewed) Now() time.Time                  { return c.Clock.Now().Add(c.by) }
func (c skewed) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewed) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// LocalClockOff runs an engine on a real clock off by by (an instance
// whose host clock is wrong; its timers run at the real pace) and on the
// database's own clock, as in production: the world's fake stand-in for the
// database's clock would hide the very skew under test.
func LocalClockOff(by time.Duration) func(*engine.Config) {
	return func(c *engine.Config) {
		c.Clock = skewed{Clock: clockwork.NewRealClock(), by: by}
		testhooks.SetDatabaseClock(c, nil)
	}
}

// AcquireSignal is a pool tracer (pgxpool.Config.ConnConfig.Tracer) that
// reports on Started every Acquire as it begins, dropping reports the
// channel has no room for: a test waits on it for a caller to be waiting
// for a connection, rather than sleeping.
type AcquireSignal struct{ Started chan struct{} }

// NewAcquireSignal returns a signal with room for n reports.
func NewAcquireSignal(n int) AcquireSignal { return AcquireSignal{Started: make(chan struct{}, n)} }

func (a AcquireSignal) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	select {
	case a.Started <- struct{}{}:
	default:
	}
	return ctx
}

func (AcquireSignal) TraceAcquireEnd(context.Context, *pgxpool.Pool, pgxpool.TraceAcquireEndData) {}

func (AcquireSignal) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (AcquireSignal) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
