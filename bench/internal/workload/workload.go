// Package workload is what the benchmarks and the emitratio driver measure:
// a reference host's small transaction with and without engine.Emit or a
// River InsertTx, and concurrent emitters on one dedup key or on many. Both
// the testing.B benchmarks and the driver run exactly this code.
package workload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

// Variant is one kind of host transaction.
type Variant int

const (
	Bare        Variant = iota // UPDATE a todo, INSERT an attempt, commit
	Emit0Sinks                 // plus engine.Emit of a dead letter matching no sink
	Emit1Sink                  // plus engine.Emit of a dead letter matching 1 sink
	Emit10Sinks                // plus engine.Emit of a dead letter matching 10 sinks
	RiverInsert                // plus one River InsertTx of a trivial job

	// The batch variants send the host's statements in one pgx.Batch (one
	// round trip between BEGIN and COMMIT); see batch.go.
	BareBatch        // UPDATE and INSERT queued in one batch
	Emit1SinkBatch   // plus the emit queued into the same batch (BatchEmitter), 1 sink
	Emit10SinksBatch // the same, 10 sinks
)

// BatchVariants lists the batch variants, bare first.
var BatchVariants = []Variant{BareBatch, Emit1SinkBatch, Emit10SinksBatch}

// Variants lists every variant, bare first.
var Variants = []Variant{Bare, Emit0Sinks, Emit1Sink, Emit10Sinks, RiverInsert}

func (v Variant) String() string {
	return [...]string{"bare", "emit_0_sinks", "emit_1_sink", "emit_10_sinks", "river_inserttx",
		"bare_batch", "emit_1_sink_batch", "emit_10_sinks_batch"}[v]
}

// StormMode is one kind of concurrent writer.
type StormMode int

const (
	EmitHot        StormMode = iota // delivery.quarantined, every emitter on one webhook
	EmitDistinct                    // delivery.quarantined, each emitter on its own webhook
	UpsertHot                       // INSERT ... ON CONFLICT DO UPDATE count+1, one row
	UpsertDistinct                  // the same, one row per writer
)

// StormModes lists every storm mode.
var StormModes = []StormMode{EmitHot, EmitDistinct, UpsertHot, UpsertDistinct}

func (m StormMode) String() string {
	return [...]string{"hot", "distinct", "upsert_hot", "upsert_distinct"}[m]
}

// TodosPerVariant is how many todos each variant's UPDATE cycles through.
const TodosPerVariant = 64

// StormWorkers is the number of concurrent emitters in a storm.
const StormWorkers = 8

// NoopArgs is the trivial River job of the river_inserttx variant.
type NoopArgs struct {
	TodoID int64 `json:"todo_id"`
}

// Kind implements river.JobArgs.
func (NoopArgs) Kind() string { return "bench_noop" }

type hostSet struct {
	owner notifytype.OwnerScope
	queue int64
	todos []int64
	next  atomic.Uint64
}

// World is a migrated database with the fixtures every variant needs.
type World struct {
	Pool   *pgxpool.Pool
	Engine *engine.Engine
	River  *river.Client[pgx.Tx]

	hosts [8]*hostSet

	stormOwner    notifytype.OwnerScope
	stormHot      int64   // the webhook every hot emitter names
	stormDistinct []int64 // one webhook per distinct emitter
}

// OpenPool opens a pool on url with room for StormWorkers concurrent
// transactions (pgxpool's default is max(4, NumCPU) connections).
func OpenPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2 * StormWorkers
	return pgxpool.NewWithConfig(ctx, cfg)
}

// MigrateRiver applies River's migrations (main line) to the database.
func MigrateRiver(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// Setup builds the world in a database already migrated with
// host.Migrate and MigrateRiver. Fixtures go in through f, straight in SQL
// (the 10-sink owner is at the management service's default ceiling).
func Setup(ctx context.Context, pool *pgxpool.Pool, f *hosttest.Factory) (*World, error) {
	eng, err := engine.New(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links()})
	if err != nil {
		return nil, err
	}
	// Insert-only: no Queues, no Workers, never started.
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	w := &World{Pool: pool, Engine: eng, River: rc}

	sinksFor := map[Variant]int{Emit1Sink: 1, Emit10Sinks: 10, Emit1SinkBatch: 1, Emit10SinksBatch: 10}
	for _, v := range append(slices.Clone(Variants), BatchVariants...) {
		owner := hostid.Human(f.Human(""))
		h := &hostSet{owner: owner, queue: f.Queue(owner, "")}
		for range TodosPerVariant {
			h.todos = append(h.todos, f.Todo(hosttest.TodoOpts{Queue: h.queue}))
		}
		for range sinksFor[v] {
			s := f.Sink(storetest.SinkOpts{Owner: owner})
			f.Subscription(storetest.SubscriptionOpts{Sink: s, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
		}
		w.hosts[v] = h
	}

	// The storm: one sink hears every webhook's quarantine events.
	w.stormOwner = hostid.Human(f.Human(""))
	s := f.Sink(storetest.SinkOpts{Owner: w.stormOwner})
	f.Subscription(storetest.SubscriptionOpts{Sink: s, EventTypes: []notifytype.EventType{host.EventDeliveryQuarantined}})
	w.stormHot = f.Webhook(w.stormOwner, "")
	for range StormWorkers {
		w.stormDistinct = append(w.stormDistinct, f.Webhook(w.stormOwner, ""))
	}
	// Open every storm key's row first, so the storms measure repeats and
	// not the race for a key's first row.
	for i := range StormWorkers {
		for _, m := range []StormMode{EmitHot, EmitDistinct} {
			if err := w.StormTx(ctx, m, i); err != nil {
				return nil, err
			}
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_counter (key text PRIMARY KEY, count bigint NOT NULL)`); err != nil {
		return nil, fmt.Errorf("error creating the scratch table: %w", err)
	}
	// Warm up: open every connection the storms use and prepare each
	// statement on it (pgx caches prepared statements per connection), so
	// the first variant measured pays for none of it.
	for range 4 {
		for _, m := range StormModes {
			if _, err := w.Storm(ctx, m, 4*StormWorkers); err != nil {
				return nil, err
			}
		}
		for _, v := range w.HostVariants() {
			if err := w.HostTx(ctx, v); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// HostTx runs one host transaction of variant v: UPDATE a todo (round
// robin among the variant's todos) to dead, INSERT its attempt, the
// variant's extra write, commit.
func (w *World) HostTx(ctx context.Context, v Variant) error {
	h := w.hosts[v]
	i := h.next.Add(1) - 1
	todo := h.todos[i%uint64(len(h.todos))]
	if v >= BareBatch {
		// Round robin: this is the todo's (i / todos + 1)-th dead letter.
		return w.hostTxBatch(ctx, v, h, todo, int(i/uint64(len(h.todos)))+1)
	}
	return pgx.BeginFunc(ctx, w.Pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `UPDATE todos SET state = 'dead', dead_letter_count = dead_letter_count + 1, updated_at = now()
			WHERE id = $1 RETURNING dead_letter_count`, todo).Scan(&n); err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO attempts (todo_id, number, kind, outcome, finished_at)
			VALUES ($1, $2, 'agent', 'failed', now())`, todo, n); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		switch v {
		case Emit0Sinks, Emit1Sink, Emit10Sinks:
			// A new dead-letter count each time: every emit inserts rows.
			return w.Engine.Emit(ctx, tx, engine.Event{
				Type: host.EventTodoDeadLettered, Owner: h.owner, QueueID: h.queue,
				OccurrenceKey: host.DeadLetterKey(todo, n),
				Content:       host.WithTodo(sinks.Content{Title: "flaky build", Place: "forge"}, host.TodoContent{Cause: "fail at the cap"}),
			})
		case RiverInsert:
			_, err := w.River.InsertTx(ctx, tx, NoopArgs{TodoID: todo}, nil)
			return err
		}
		return nil
	})
}

// StormTx runs one storm writer's transaction: begin, one write, commit.
// worker picks the key in the distinct modes.
func (w *World) StormTx(ctx context.Context, m StormMode, worker int) error {
	return pgx.BeginFunc(ctx, w.Pool, func(tx pgx.Tx) error {
		switch m {
		case EmitHot, EmitDistinct:
			hook := w.stormHot
			if m == EmitDistinct {
				hook = w.stormDistinct[worker%len(w.stormDistinct)]
			}
			return w.Engine.Emit(ctx, tx, engine.Event{
				Type: host.EventDeliveryQuarantined, Owner: w.stormOwner, WebhookID: hook, Subject: host.QuarantineSubject(hook),
				Content: sinks.Content{Place: "github", Summary: "deliveries quarantined"},
			})
		default:
			key := "hot"
			if m == UpsertDistinct {
				key = fmt.Sprintf("w%d", worker)
			}
			_, err := tx.Exec(ctx, `INSERT INTO bench_counter (key, count) VALUES ($1, 1)
				ON CONFLICT (key) DO UPDATE SET count = bench_counter.count + 1`, key)
			return err
		}
	})
}

// Storm runs total transactions of mode m on StormWorkers concurrent
// writers, each its own connection and transaction per event, and returns
// how long they took.
func (w *World) Storm(ctx context.Context, m StormMode, total int) (time.Duration, error) {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	for i := range StormWorkers {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				if err := w.StormTx(ctx, m, i); err != nil {
					once.Do(func() { first = fmt.Errorf("%s writer %d: %w", m, i, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), first
}

// Counts reports what the runs wrote, to check that each emit inserted what
// it should.
type Counts struct {
	Outbox map[Variant]int // outbox rows of each host variant's owner
	Txs    map[Variant]int // todo updates of each host variant (dead_letter_count summed)
	Events int             // events the storm owner's open rows stand for
	Open   int             // open outbox rows of the storm owner
}

// Count fans out what was emitted (as the claimers do, off the host's
// path) and reads the counts.
func (w *World) Count(ctx context.Context) (Counts, error) {
	c := Counts{Outbox: map[Variant]int{}, Txs: map[Variant]int{}}
	if _, err := testhooks.FanOut(ctx, w.Engine); err != nil {
		return c, err
	}
	for _, v := range w.HostVariants() {
		h := w.hosts[v]
		var o, t int
		if err := w.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchboard.outbox WHERE owner = $1),
			(SELECT coalesce(sum(dead_letter_count), 0) FROM todos WHERE queue_id = $2)`,
			h.owner.String(), h.queue).Scan(&o, &t); err != nil {
			return c, err
		}
		c.Outbox[v], c.Txs[v] = o, t
	}
	err := w.Pool.QueryRow(ctx, `SELECT coalesce(sum(count), 0), count(*) FROM switchboard.outbox
		WHERE owner = $1 AND state IN ('pending', 'held')`,
		w.stormOwner.String()).Scan(&c.Events, &c.Open)
	return c, err
}

// Check verifies that every emit inserted one row per matching sink and
// that the storms kept one open row per key.
func (c Counts) Check() error {
	for v, sinks := range map[Variant]int{Emit0Sinks: 0, Emit1Sink: 1, Emit10Sinks: 10, Emit1SinkBatch: 1, Emit10SinksBatch: 10} {
		if _, ok := c.Txs[v]; !ok {
			continue // a batch variant the engine does not offer
		}
		if c.Outbox[v] != sinks*c.Txs[v] {
			return fmt.Errorf("%s: %d outbox rows for %d transactions, want %d", v, c.Outbox[v], c.Txs[v], sinks*c.Txs[v])
		}
	}
	if c.Open != 1+StormWorkers {
		return fmt.Errorf("storm: %d open rows, want %d (one per key)", c.Open, 1+StormWorkers)
	}
	return nil
}
