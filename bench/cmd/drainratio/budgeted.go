package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/rig"
	"github.com/switchboard/notify/bench/internal/standin"
)

// Baseline (c): the hand loop that keeps the engine's promises, written
// from issue 26's description: budgets exact across instances (each sink's
// GCRA time advanced under its row's lock), a record written before each
// send, a row another worker holds left alone (SKIP LOCKED), every row
// delivered once, and a row whose worker died sent again once its claim
// expires. A worker's loop:
//
//  1. one transaction, two round trips: claim up to batch due rows FOR
//     UPDATE SKIP LOCKED and lock their sinks' rows in id order (one
//     statement); advance each sink's theoretical arrival time (GCRA) once
//     per row, here; then one statement writes the sinks' times, marks the
//     rows sent (state sending, attempt counted, claim until now + 30 s) or
//     puts the refused ones back due when their sink has a token again, and
//     inserts one `sending` record per row; COMMIT;
//  2. the POSTs, budgetedPosts at a time;
//  3. one statement (its own transaction) finishes every record and marks
//     its row delivered, guarded by the row's attempt (its claim).
//
// Once a second a worker gives back rows whose claim expired (their worker
// died mid-send): pending again, sent again (at least once).
const budgetedSchema = `
CREATE TABLE bench_budget_sinks (
    id          bigint PRIMARY KEY,
    tat         timestamptz NOT NULL DEFAULT 'epoch',
    emission_us bigint NOT NULL,
    burst       integer NOT NULL
);
CREATE TABLE bench_budget_jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink_id       bigint NOT NULL,
    key           text NOT NULL,
    body          bytea NOT NULL,
    state         text NOT NULL DEFAULT 'pending',
    attempts      integer NOT NULL DEFAULT 0,
    due_at        timestamptz NOT NULL DEFAULT now(),
    claimed_until timestamptz
);
CREATE INDEX bench_budget_due ON bench_budget_jobs (due_at) WHERE state = 'pending';
CREATE INDEX bench_budget_claimed ON bench_budget_jobs (claimed_until) WHERE state = 'sending';
CREATE TABLE bench_budget_records (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL,
    sink_id     bigint NOT NULL,
    attempt     integer NOT NULL,
    status      text NOT NULL,
    http_status integer,
    sent_at     timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX bench_budget_records_sink ON bench_budget_records (sink_id, id);`

// budgetedPosts is how many POSTs one worker has in flight.
const budgetedPosts = 16

// budgetedClaimTTL is how long a sent row stays claimed by its worker.
const budgetedClaimTTL = 30 * time.Second

const budgetedClaimSQL = `WITH c AS (
    SELECT id, sink_id, key, body, attempts FROM bench_budget_jobs
    WHERE state = 'pending' AND due_at <= now() ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED
), s AS (
    SELECT id, tat, emission_us, burst FROM bench_budget_sinks
    WHERE id IN (SELECT sink_id FROM c) ORDER BY id FOR UPDATE
)
SELECT c.id, c.sink_id, c.key, c.body, c.attempts, s.tat, s.emission_us, s.burst, now()
FROM c JOIN s ON s.id = c.sink_id ORDER BY c.sink_id, c.id`

// budgetedStartSQL: $1..$2 the sinks and their new times; $3..$6 every
// row, whether it got a token, its attempt and when it is due again when
// it did not; $7 the claim's end.
const budgetedStartSQL = `WITH t AS (
    UPDATE bench_budget_sinks s SET tat = v.tat FROM unnest($1::bigint[], $2::timestamptz[]) v(id, tat) WHERE s.id = v.id
), j AS (
    UPDATE bench_budget_jobs j
    SET state = CASE WHEN v.ok THEN 'sending' ELSE 'pending' END,
        attempts = j.attempts + v.ok::int,
        due_at = CASE WHEN v.ok THEN j.due_at ELSE v.due END,
        claimed_until = CASE WHEN v.ok THEN $7::timestamptz END
    FROM unnest($3::bigint[], $4::bool[], $5::int[], $6::timestamptz[]) v(id, ok, attempt, due)
    WHERE j.id = v.id
    RETURNING j.id, j.sink_id, j.attempts, v.ok
)
INSERT INTO bench_budget_records (job_id, sink_id, attempt, status, sent_at)
SELECT id, sink_id, attempts, 'sending', now() FROM j WHERE ok
RETURNING id, job_id`

// budgetedFinishSQL: the records $1, their rows $2 at attempt $3, status
// $4, HTTP status $5. A row whose claim this worker no longer holds (its
// attempt moved on) keeps its state; its record is finished all the same.
const budgetedFinishSQL = `WITH v AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::int[]) v(rec, job, attempt, status, code)
), r AS (
    UPDATE bench_budget_records r SET status = v.status, http_status = v.code, finished_at = now()
    FROM v WHERE r.id = v.rec
)
UPDATE bench_budget_jobs j
SET state = CASE WHEN v.status = 'delivered' THEN 'delivered' ELSE 'pending' END,
    due_at = CASE WHEN v.status = 'delivered' THEN j.due_at ELSE now() + interval '30 seconds' END,
    claimed_until = NULL
FROM v WHERE j.id = v.job AND j.state = 'sending' AND j.attempts = v.attempt`

const budgetedExpiredSQL = `UPDATE bench_budget_jobs SET state = 'pending', claimed_until = NULL
WHERE state = 'sending' AND claimed_until < now()`

// budgetedLoad inserts js as due rows, and every sink of the fleet with
// the lifted budget.
func budgetedLoad(ctx context.Context, pool *pgxpool.Pool, js []job, keys map[int64]string) error {
	ids := make([]int64, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	emission := int64(time.Hour/time.Microsecond) / rig.LiftedPerHour
	if _, err := pool.Exec(ctx, `INSERT INTO bench_budget_sinks (id, emission_us, burst)
		SELECT id, $2, $3 FROM unnest($1::bigint[]) id`, ids, emission, rig.LiftedBurst); err != nil {
		return err
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"bench_budget_jobs"}, []string{"sink_id", "key", "body"},
		pgx.CopyFromSlice(len(js), func(i int) ([]any, error) { return []any{js[i].SinkID, js[i].Key, js[i].Body}, nil }))
	return err
}

// budgeted runs baseline (c): workers loops as above, until a claim finds
// nothing due. meter, when set, is sampled before the pool closes.
// pool is the loop's, of workers connections (baselinePool), and closed
// by it.
func budgeted(ctx context.Context, pool *pgxpool.Pool, base string, batch, workers int, meter *rig.CPUMeter) (int64, error) {
	defer pool.Close()
	client := standin.Client(workers * budgetedPosts)
	defer client.CloseIdleConnections()
	var (
		done    atomic.Int64
		wg      sync.WaitGroup
		once    sync.Once
		first   error
		expired atomic.Int64 // unix ns of the last search for expired claims
	)
	for range workers {
		wg.Go(func() {
			for {
				if last := expired.Load(); time.Since(time.Unix(0, last)) > time.Second && expired.CompareAndSwap(last, time.Now().UnixNano()) {
					if _, err := pool.Exec(ctx, budgetedExpiredSQL); err != nil {
						once.Do(func() { first = err })
						return
					}
				}
				n, claimed, err := budgetedBatch(ctx, pool, client, base, batch)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				if claimed == 0 {
					return
				}
				done.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if meter != nil {
		meter.Sample(ctx)
	}
	return done.Load(), first
}

type budgetedRow struct {
	id, sink  int64
	key       string
	body      []byte
	attempt   int32
	ok        bool
	due       time.Time
	record    int64
	delivered bool
}

// budgetedBatch is one turn of a worker's loop; it returns the rows
// delivered and the rows claimed (0 when nothing was due).
func budgetedBatch(ctx context.Context, pool *pgxpool.Pool, c *http.Client, base string, batch int) (delivered, claimed int, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	var rows []budgetedRow
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rs, err := tx.Query(ctx, budgetedClaimSQL, batch)
		if err != nil {
			return err
		}
		var (
			sinkIDs  []int64
			sinkTATs []time.Time
		)
		for rs.Next() {
			var (
				r          budgetedRow
				tat, now   time.Time
				emissionUS int64
				burst      int32
			)
			if err := rs.Scan(&r.id, &r.sink, &r.key, &r.body, &r.attempt, &tat, &emissionUS, &burst, &now); err != nil {
				return err
			}
			// GCRA: the row takes a token when the sink's time, advanced
			// by one emission interval, stays within its burst of now.
			if len(sinkIDs) == 0 || sinkIDs[len(sinkIDs)-1] != r.sink {
				sinkIDs, sinkTATs = append(sinkIDs, r.sink), append(sinkTATs, tat)
			}
			t := &sinkTATs[len(sinkTATs)-1]
			emission := time.Duration(emissionUS) * time.Microsecond
			next := *t
			if next.Before(now) {
				next = now
			}
			next = next.Add(emission)
			if next.Sub(now) <= emission*time.Duration(burst) {
				r.ok, *t = true, next
			} else {
				r.due = t.Add(emission - emission*time.Duration(burst))
			}
			rows = append(rows, r)
		}
		if err := rs.Err(); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		ids, oks, attempts, dues := make([]int64, len(rows)), make([]bool, len(rows)), make([]int32, len(rows)), make([]time.Time, len(rows))
		for i, r := range rows {
			ids[i], oks[i], attempts[i], dues[i] = r.id, r.ok, r.attempt+1, r.due
		}
		started, err := tx.Query(ctx, budgetedStartSQL, sinkIDs, sinkTATs, ids, oks, attempts, dues, time.Now().Add(budgetedClaimTTL))
		if err != nil {
			return err
		}
		recs := map[int64]int64{}
		for started.Next() {
			var rec, id int64
			if err := started.Scan(&rec, &id); err != nil {
				return err
			}
			recs[id] = rec
		}
		if err := started.Err(); err != nil {
			return err
		}
		for i := range rows {
			rows[i].record = recs[rows[i].id]
		}
		return nil
	})
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	sem := make(chan struct{}, budgetedPosts)
	var wg sync.WaitGroup
	for i := range rows {
		if !rows[i].ok {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rows[i].delivered = standin.Post(ctx, c, base, rows[i].key, rows[i].body) == nil
		})
	}
	wg.Wait()
	var (
		recs, ids []int64
		attempts  []int32
		status    []string
		codes     []int32
	)
	for _, r := range rows {
		if !r.ok {
			continue
		}
		st, code := "failed", int32(0)
		if r.delivered {
			st, code = "delivered", 200
		}
		recs, ids, attempts, status, codes = append(recs, r.record), append(ids, r.id), append(attempts, r.attempt+1), append(status, st), append(codes, code)
	}
	if len(ids) == 0 {
		return 0, len(rows), nil
	}
	if _, err := conn.Exec(ctx, budgetedFinishSQL, recs, ids, attempts, status, codes); err != nil {
		return 0, len(rows), err
	}
	for _, r := range rows {
		if r.ok && r.delivered {
			delivered++
		}
	}
	return delivered, len(rows), nil
}
