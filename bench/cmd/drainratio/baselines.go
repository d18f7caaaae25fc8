package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/fleet"
	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/bench/internal/standin"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// job is one delivery of the baselines: the sink's key and the message
// body, rendered as the engine's Gotify adapter renders it. The baselines
// are given bodies ready to send; the engine renders and decrypts its own.
type job struct {
	SinkID int64  `json:"sink_id"`
	Key    string `json:"key"`
	Body   []byte `json:"body"`
}

// jobs makes n deliveries across the fleet's sinks in turn, each with a
// body of its own (a new todo id in its link).
func jobs(f *fleet.Fleet, keys map[int64]string, r *rig.Rig, n int) []job {
	var all []int64
	for _, o := range f.Owners {
		all = append(all, o.Sinks...)
	}
	out := make([]job, n)
	for i := range out {
		ev := r.Event(notifytype.OwnerScope{})
		msg := host.Render(ev.Content, sinks.Meta{EventType: ev.Type, Severity: notifytype.SeverityHigh, Count: 1,
			BaseURL: "https://switchboard.example.net"})
		b, _ := json.Marshal(struct {
			Title    string `json:"title"`
			Message  string `json:"message"`
			Priority int    `json:"priority"`
		}{msg.Title, msg.Body, 8})
		s := all[i%len(all)]
		out[i] = job{SinkID: s, Key: keys[s], Body: b}
	}
	return out
}

const handSchema = `
CREATE TABLE bench_hand_jobs (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink_id bigint NOT NULL,
    key     text NOT NULL,
    body    bytea NOT NULL,
    state   text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    due_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_hand_due ON bench_hand_jobs (due_at) WHERE state = 'pending';
CREATE TABLE bench_hand_records (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL,
    sink_id     bigint NOT NULL,
    status      text NOT NULL,
    http_status integer,
    sent_at     timestamptz NOT NULL
);`

// handLoad inserts js as due rows of the hand loop's table (COPY).
func handLoad(ctx context.Context, pool *pgxpool.Pool, js []job) error {
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"bench_hand_jobs"}, []string{"sink_id", "key", "body"},
		pgx.CopyFromSlice(len(js), func(i int) ([]any, error) { return []any{js[i].SinkID, js[i].Key, js[i].Body}, nil }))
	return err
}

// hand is baseline (a): conc workers, each in a loop: BEGIN; claim up to
// batch due rows (SELECT … ORDER BY due_at LIMIT batch FOR UPDATE SKIP
// LOCKED); POST each, one after another; mark them delivered and insert
// one record each (one pgx.Batch: one round trip); COMMIT; until a claim
// finds nothing. One transaction per batch, rows locked while posted.
// pool is the loop's, of conc connections (baselinePool), and closed by it.
func hand(ctx context.Context, pool *pgxpool.Pool, base string, batch, conc int, meter *rig.CPUMeter) (int64, error) {
	defer pool.Close()
	client := standin.Client(conc)
	defer client.CloseIdleConnections()
	var (
		done  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range conc {
		wg.Go(func() {
			for {
				n, err := handClaimBatch(ctx, pool, client, base, batch)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				if n == 0 {
					return
				}
				done.Add(int64(n))
			}
		})
	}
	wg.Wait()
	meter.Sample(ctx)
	return done.Load(), first
}

func handClaimBatch(ctx context.Context, pool *pgxpool.Pool, c *http.Client, base string, batch int) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, sink_id, key, body FROM bench_hand_jobs
			WHERE state = 'pending' AND due_at <= now() ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED`, batch)
		if err != nil {
			return err
		}
		type row struct {
			id, sink int64
			key      string
			body     []byte
		}
		var rs []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.sink, &r.key, &r.body); err != nil {
				return err
			}
			rs = append(rs, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(rs) == 0 {
			return nil
		}
		ids, sinkIDs, status, codes, at := make([]int64, len(rs)), make([]int64, len(rs)), make([]string, len(rs)), make([]int32, len(rs)), make([]time.Time, len(rs))
		for i, r := range rs {
			ids[i], sinkIDs[i], at[i] = r.id, r.sink, time.Now()
			if err := standin.Post(ctx, c, base, r.key, r.body); err != nil {
				status[i], codes[i] = "failed", 0
			} else {
				status[i], codes[i] = "delivered", 200
			}
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE bench_hand_jobs j SET state = v.s, attempts = attempts + 1
			FROM unnest($1::bigint[], $2::text[]) v(id, s) WHERE j.id = v.id`, ids, status)
		b.Queue(`INSERT INTO bench_hand_records (job_id, sink_id, status, http_status, sent_at)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::int[], $5::timestamptz[])`, ids, sinkIDs, status, codes, at)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		n = len(rs)
		return nil
	})
	return n, err
}

// riverArgs is one delivery as a River job.
type riverArgs struct {
	Key  string `json:"key"`
	Body []byte `json:"body"`
}

func (riverArgs) Kind() string { return "bench_deliver" }

// riverWorker POSTs the job's message to the stand-in; an error fails the
// job (River retries it).
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	client *http.Client
	base   string
}

func (w *riverWorker) Work(ctx context.Context, j *river.Job[riverArgs]) error {
	return standin.Post(ctx, w.client, w.base, j.Args.Key, j.Args.Body)
}

// riverSettings are baseline (b)'s, tuned for throughput.
type riverSettings struct {
	MaxWorkers        int
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	PoolConns         int32
}

func (s riverSettings) String() string {
	return fmt.Sprintf("MaxWorkers %d, FetchCooldown %v, FetchPollInterval %v, pool of %d connections",
		s.MaxWorkers, s.FetchCooldown, s.FetchPollInterval, s.PoolConns)
}

// riverRun is baseline (b): js inserted as River jobs (InsertManyFast,
// before the client starts), then a client working them; it returns when
// River reported the last job completed (its completion persisted), and
// the time from Start to that.
// It returns the time from Start to the last job completed, and the
// machine's use over it (benchdb.Machine); meter is called as the
// client starts, and what it returns once the last job completed (the
// pool still open: a rig.CPUMeter's start and stop).
func riverRun(ctx context.Context, url, base string, js []job, s riverSettings, meter func() (stop func())) (took time.Duration, cpu benchdb.Machine, err error) {
	pool, err := baselinePool(ctx, url, s.PoolConns)
	if err != nil {
		return 0, benchdb.Machine{}, err
	}
	defer pool.Close()
	hc := standin.Client(256)
	defer hc.CloseIdleConnections()
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{client: hc, base: base})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.MaxWorkers}},
		FetchCooldown:     s.FetchCooldown,
		FetchPollInterval: s.FetchPollInterval,
		Workers:           workers,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return 0, benchdb.Machine{}, fmt.Errorf("error creating River client: %w", err)
	}
	for i := 0; i < len(js); i += 2000 {
		params := make([]river.InsertManyParams, 0, 2000)
		for _, j := range js[i:min(i+2000, len(js))] {
			params = append(params, river.InsertManyParams{Args: riverArgs{Key: j.Key, Body: j.Body}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, benchdb.Machine{}, fmt.Errorf("error inserting River jobs: %w", err)
		}
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: len(js) + 16,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancel()
	start, cpu0, stopMeter := time.Now(), machine(), meter()
	if err := client.Start(ctx); err != nil {
		return 0, benchdb.Machine{}, fmt.Errorf("error starting River: %w", err)
	}
	completed := 0
	timeout := time.After(*timeoutFlag)
wait:
	for completed < len(js) {
		select {
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				completed++
			}
		case <-timeout:
			break wait
		}
	}
	took, cpu = time.Since(start), machine().Sub(cpu0)
	stopMeter()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := client.Stop(sctx); err != nil {
		return took, cpu, fmt.Errorf("error stopping River: %w", err)
	}
	if completed < len(js) {
		return took, cpu, fmt.Errorf("River completed %d of %d jobs within %v", completed, len(js), *timeoutFlag)
	}
	return took, cpu, nil
}

// baselinePool is a baseline's pool of conns connections on url. With
// -open-pools it has opened them all when it is returned, as the engines'
// pools have (rig.OpenPool); otherwise it opens them as they are asked
// for, inside the baseline's clock (pgxpool's default).
func baselinePool(ctx context.Context, url string, conns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = conns
	if *openPools {
		pc.MinConns = conns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := rig.WaitOpen(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
