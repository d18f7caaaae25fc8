// Package rig is what the pipeline drivers share: a fresh database with a
// fleet of sinks on one stand-in, engines served on pools of their own,
// the statement tracer, and the reading of machine and server settings.
package rig

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/fleet"
	"github.com/switchboard/notify/bench/internal/standin"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Lifted budgets: the operator maxima of the drain's engines and what every
// sink of a drain is created with (one token per 100 µs per sink; a burst
// that covers any backlog the drivers make).
const (
	LiftedPerHour = 36_000_000
	LiftedBurst   = 1_000_000
)

// Rig is a fresh database, its pool and the stand-in.
type Rig struct {
	URL  string
	Pool *pgxpool.Pool // the host's pool: fixtures, backlogs, checks
	Key  []byte
	GS   *standin.Server
	Log  *slog.Logger
	drop func() error
	todo atomic.Int64
}

// Open creates sbbench_<random> on DATABASE_URL's server, migrates it
// (host.Migrate; River's too when river is set, by the caller) and starts
// the stand-in.
func Open(ctx context.Context, poolConns int32) (*Rig, error) {
	admin := cmp.Or(os.Getenv("DATABASE_URL"), benchdb.DefaultAdminURL)
	url, drop, err := benchdb.Create(ctx, admin)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		_ = drop()
		return nil, err
	}
	if poolConns > 0 {
		pc.MaxConns = poolConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		_ = drop()
		return nil, err
	}
	r := &Rig{URL: url, Pool: pool, Key: make([]byte, 32), GS: standin.New(), drop: drop,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	_, _ = rand.Read(r.Key)
	if err := migrate(ctx, pool); err != nil {
		r.Close(false)
		return nil, err
	}
	return r, nil
}

// Close stops the stand-in, closes the pool and drops the database unless
// keep (then it prints its URL).
func (r *Rig) Close(keep bool) error {
	r.GS.Close()
	r.Pool.Close()
	if keep {
		fmt.Printf("\ndatabase kept: %s\n", r.URL)
		return nil
	}
	return r.drop()
}

// Fleet builds scopes × perScope sinks on the stand-in subscribed to
// todo.dead_lettered, with the budget given.
func (r *Rig) Fleet(ctx context.Context, scopes, perScope, perHour, burst int, tag string) (*fleet.Fleet, error) {
	return fleet.Build(ctx, r.Pool, r.Key, fleet.Options{
		Scopes: scopes, SinksPerScope: perScope, BaseURL: r.GS.URL, PerHour: perHour, Burst: burst,
		EventType: host.EventTodoDeadLettered, Tag: tag,
	})
}

// Config is an engine configuration on pool: loopback allowed over plain
// HTTP, the rig's key, the real clock, everything else at its default but
// for the budget bounds when lifted.
func (r *Rig) Config(pool *pgxpool.Pool, lifted bool) engine.Config {
	cfg := engine.Config{
		Pool:      pool,
		Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(),
		SecretKey:     r.Key,
		BaseURL:       "https://switchboard.example.net",
		PushAllowHTTP: true,
		PrivateHosts:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:        r.Log,
	}
	if lifted {
		cfg.BudgetPerHourMax, cfg.BudgetBurstMax = LiftedPerHour, LiftedBurst
	}
	return cfg
}

// Event is one todo.dead_lettered event of o with a todo id never used
// before in this rig (a new dedup key, and a message body of its own).
func (r *Rig) Event(o notifytype.OwnerScope) engine.Event {
	id := r.todo.Add(1)
	return engine.Event{
		Type: host.EventTodoDeadLettered, Owner: o, OccurrenceKey: host.DeadLetterKey(id, 1),
		Content: host.WithTodo(sinks.Content{Title: "nightly build", Place: "forge",
			LinkPath: fmt.Sprintf("/board/todos/%d", id)}, host.TodoContent{Cause: "fail at the cap", Attempts: 3}),
	}
}

// Backlog emits events for the fleet's owners in turn (each event reaches
// every sink of its owner) until deliveries rows are due, in transactions
// of 200 emits, through eng (which need not serve). It returns the rows
// made.
func (r *Rig) Backlog(ctx context.Context, eng *engine.Engine, f *fleet.Fleet, deliveries int) (int, error) {
	made, i := 0, 0
	for made < deliveries {
		err := pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
			for k := 0; k < 200 && made < deliveries; k++ {
				o := f.Owners[i%len(f.Owners)]
				i++
				if err := eng.Emit(ctx, tx, r.Event(o.Scope)); err != nil {
					return err
				}
				made += len(o.Sinks)
			}
			return nil
		})
		if err != nil {
			return made, fmt.Errorf("error emitting the backlog: %w", err)
		}
	}
	return made, nil
}

// FanOutBacklog fans out, with eng, the events Backlog emitted: their
// outbox rows exist, and the outbox's statistics know them, when it
// returns. A backlog that built up while an engine ran (its sinks were down
// or slow) is rows, not events: the engine fanned each event out as it
// came. It waits for the statistics the fan-out refreshes in the background
// (the engine analyzes the outbox after every few thousand rows), so that
// nothing of the fan-out runs once the clock starts.
func (r *Rig) FanOutBacklog(ctx context.Context, eng *engine.Engine) error {
	if _, err := testhooks.FanOut(ctx, eng); err != nil {
		return fmt.Errorf("error fanning out the backlog: %w", err)
	}
	// The VACUUM waits for an ANALYZE the fan-out began, and refreshes the
	// statistics itself if the fan-out's comes after it; the loop waits for
	// that one.
	if _, err := r.Pool.Exec(ctx, `VACUUM (ANALYZE) switchboard.outbox, switchboard.outbox_events`); err != nil {
		return fmt.Errorf("error vacuuming after the fan-out: %w", err)
	}
	for {
		var busy bool
		if err := r.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query LIKE '%ANALYZE switchboard.outbox%' AND pid <> pg_backend_pid())`).Scan(&busy); err != nil {
			return err
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Instance is one engine serving on a pool of its own.
type Instance struct {
	Eng       *engine.Engine
	Pool      *pgxpool.Pool
	Delivered atomic.Int64 // outbox rows delivered, as OnAttempt reports them
	Failed    atomic.Int64 // attempts that did not deliver
	cancel    context.CancelFunc
	done      chan error
	stopOnce  sync.Once
	stopErr   error
}

// Serve starts an engine with cfg (its Pool replaced by a new pool of
// conns connections, 0: the server binary's default, store.PoolMaxConnsDefault; tracer, when set, traces it).
// The pool opens its connections in the background, beside the engine's
// start, as the server binary's does.
func (r *Rig) Serve(cfg engine.Config, name string, conns int32, tracer pgx.QueryTracer) (*Instance, error) {
	pool, err := r.NewPool(conns, tracer, name)
	if err != nil {
		return nil, err
	}
	return r.ServeOn(pool, cfg, name)
}

// NewPool is a pool sized as the server binary sizes its own (conns
// connections instead when conns > 0; tracer, when set, traces it). It
// opens its connections in the background (pgxpool's MinConns).
func (r *Rig) NewPool(conns int32, tracer pgx.QueryTracer, name string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(r.URL)
	if err != nil {
		return nil, err
	}
	store.ApplyPoolDefaults(pc, r.URL) // as the server binary
	if name != "" {
		// The backends say whose they are (CPUMeter.DBByName).
		pc.ConnConfig.RuntimeParams["application_name"] = name
	}
	if conns > 0 {
		pc.MaxConns = conns
	}
	if tracer != nil {
		pc.ConnConfig.Tracer = tracer
	}
	return pgxpool.NewWithConfig(context.Background(), pc)
}

// OpenPool is NewPool, returned once every connection it keeps open
// (MinConns) is open: the pool of a process that started before the
// measurement.
func (r *Rig) OpenPool(ctx context.Context, conns int32, tracer pgx.QueryTracer, name string) (*pgxpool.Pool, error) {
	pool, err := r.NewPool(conns, tracer, name)
	if err != nil {
		return nil, err
	}
	if err := WaitOpen(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// WaitOpen returns once pool holds the connections it keeps open
// (MinConns), opened; an error if ctx ends or 30 s pass first (pgxpool
// does not try a failed connection again before its health check).
func WaitOpen(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		s := pool.Stat()
		open := s.TotalConns() - s.ConstructingConns()
		if open >= pool.Config().MinConns {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pool opened %d of its %d connections: %w", open, pool.Config().MinConns, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
}

// ServeOn starts an engine with cfg on pool, which the Instance closes
// when it stops.
func (r *Rig) ServeOn(pool *pgxpool.Pool, cfg engine.Config, name string) (*Instance, error) {
	in := &Instance{Pool: pool, done: make(chan error, 1)}
	cfg.Pool, cfg.Directory, cfg.Instance = pool, host.NewDirectory(pool), name
	prev := cfg.OnAttempt
	cfg.OnAttempt = func(a engine.Attempt) {
		if a.State == "delivered" {
			in.Delivered.Add(int64(len(a.Rows)))
		} else if a.State != "held" {
			in.Failed.Add(1)
		}
		if prev != nil {
			prev(a)
		}
	}
	var err error
	if in.Eng, err = engine.New(cfg); err != nil {
		pool.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { in.done <- in.Eng.Serve(ctx) }()
	return in, nil
}

// Stop stops the engine and closes its pool; later calls return the
// first's error.
func (in *Instance) Stop() error {
	in.stopOnce.Do(func() {
		in.cancel()
		err := <-in.done
		in.Pool.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		in.stopErr = err
	})
	return in.stopErr
}

// Truncate empties the delivery tables (outbox, events, records, and the
// notes of due sinks) and vacuums them, so that every measurement starts
// from the same state. The notes went on piling up dead versions from one
// drain to the next (every claim deletes and writes some) on a server
// without autovacuum, so that each drain of a run read more of them than
// the one before (docs/BENCHMARKS.md, session 21).
func (r *Rig) Truncate(ctx context.Context, extra ...string) error {
	tables := append([]string{"switchboard.outbox", "switchboard.outbox_events", "switchboard.delivery_records", "switchboard.due_sinks"}, extra...)
	if _, err := r.Pool.Exec(ctx, `TRUNCATE `+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("error truncating: %w", err)
	}
	if _, err := r.Pool.Exec(ctx, `VACUUM (ANALYZE) `+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("error vacuuming: %w", err)
	}
	return nil
}

// Describe prints the machine, the server and its settings.
func (r *Rig) Describe(ctx context.Context) error {
	var version, settings string
	if err := r.Pool.QueryRow(ctx, `SELECT version(), format('fsync %s, synchronous_commit %s, autovacuum %s, shared_buffers %s, max_connections %s, wal_level %s',
		current_setting('fsync'), current_setting('synchronous_commit'), current_setting('autovacuum'),
		current_setting('shared_buffers'), current_setting('max_connections'), current_setting('wal_level'))`).Scan(&version, &settings); err != nil {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s, load %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.TrimSpace(string(load)))
	fmt.Printf("server:  %s\n         %s\n", version, settings)
	return nil
}

// Commits is the count of committed transactions in the rig's database so
// far (pg_stat_database; the statistics lag by up to a few hundred ms, so
// read it after a pause or as a difference over a long run).
func (r *Rig) Commits(ctx context.Context) (int64, error) {
	var n int64
	_, _ = r.Pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	err := r.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// Tracer counts the statements of a pool by their text and sums their
// time, and counts the round trips: pgx's QueryTracer and BatchTracer, set
// on the engine's pool by the drain driver. A statement sent alone (Query,
// QueryRow, Exec, and BEGIN and COMMIT of pgx.BeginFunc) is one round trip,
// timed from send to its result read; a pgx.Batch is one round trip for
// all its statements, counted each and timed as a whole (Batches): the
// server sends a batch's results when it has run them all, so the time of
// one statement in it cannot be told from the wire.
type Tracer struct {
	mu         sync.Mutex
	stats      map[string]*Stat
	batches    map[string]*Stat
	roundTrips int64
	on         atomic.Bool
}

// Stat is one statement's (or batch's) count and time; Batched of the
// calls were sent in a pgx.Batch (their time is their batch's).
type Stat struct {
	SQL     string
	Calls   int64
	Batched int64
	Time    time.Duration
}

type traceKey struct{}

type traceStart struct {
	sql string
	at  time.Time
}

// NewTracer returns a tracer, off until Start.
func NewTracer() *Tracer { return &Tracer{stats: map[string]*Stat{}, batches: map[string]*Stat{}} }

// Start turns counting on (and forgets what was counted).
func (t *Tracer) Start() {
	t.mu.Lock()
	t.stats = map[string]*Stat{}
	t.batches = map[string]*Stat{}
	t.roundTrips = 0
	t.mu.Unlock()
	t.on.Store(true)
}

// Batches returns the batches counted, by their statements (each
// statement's first 40 characters, BEGIN, COMMIT and SET LOCAL left out),
// most time first; a batch's time is from SendBatch to its results read.
func (t *Tracer) Batches() []Stat {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Stat
	for _, s := range t.batches {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time > out[j].Time })
	return out
}

// RoundTrips is how many round trips were counted: statements sent alone
// and batches.
func (t *Tracer) RoundTrips() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.roundTrips
}

// Stop turns counting off and returns the statements, most time first.
func (t *Tracer) Stop() []Stat {
	t.on.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Stat
	for _, s := range t.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time > out[j].Time })
	return out
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !t.on.Load() {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceStart{sql: d.SQL, at: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	t.count(s.sql, time.Since(s.at), false)
}

type batchKey struct{}

type batchTrace struct {
	at    time.Time
	shape []string
}

// TraceBatchStart implements pgx.BatchTracer.
func (t *Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if !t.on.Load() {
		return ctx
	}
	t.mu.Lock()
	t.roundTrips++
	t.mu.Unlock()
	return context.WithValue(ctx, batchKey{}, &batchTrace{at: time.Now()})
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	bt, ok := ctx.Value(batchKey{}).(*batchTrace)
	if !ok {
		return
	}
	t.count(d.SQL, 0, true)
	sql := strings.Join(strings.Fields(d.SQL), " ")
	if u := strings.ToUpper(sql); u == "BEGIN" || u == "COMMIT" || strings.HasPrefix(u, "SET LOCAL") {
		return
	}
	bt.shape = append(bt.shape, sql[:min(len(sql), 40)])
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	bt, ok := ctx.Value(batchKey{}).(*batchTrace)
	if !ok {
		return
	}
	key := strings.Join(bt.shape, " ; ")
	t.mu.Lock()
	st := t.batches[key]
	if st == nil {
		st = &Stat{SQL: key}
		t.batches[key] = st
	}
	st.Calls++
	st.Time += time.Since(bt.at)
	t.mu.Unlock()
}

func (t *Tracer) count(sql string, d time.Duration, batched bool) {
	key := strings.Join(strings.Fields(sql), " ")
	t.mu.Lock()
	st := t.stats[key]
	if st == nil {
		st = &Stat{SQL: key}
		t.stats[key] = st
	}
	st.Calls++
	st.Time += d
	if batched {
		st.Batched++
	} else {
		t.roundTrips++
	}
	t.mu.Unlock()
}

// Pct is the p-th percentile of xs (nearest rank); NaN when empty.
func Pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// SinkKeys reads every sink's Gotify key, by sink id (fleet.Build's
// convention: the connection id in the secret).
func (r *Rig) SinkKeys(ctx context.Context) (map[int64]string, error) {
	rows, err := r.Pool.Query(ctx, `SELECT id, connection_id FROM switchboard.sinks`)
	if err != nil {
		return nil, err
	}
	keys := map[int64]string{}
	for rows.Next() {
		var s, c int64
		if err := rows.Scan(&s, &c); err != nil {
			return nil, err
		}
		keys[s] = fmt.Sprintf("gtfya.fleet-%d", c)
	}
	return keys, rows.Err()
}
