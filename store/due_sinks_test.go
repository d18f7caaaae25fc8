package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// A claim finds the sinks it may take rows of from their notes
// (switchboard.due_sinks, migration 0029), not from their rows: what it
// reads grows with the sinks it passes and the rows it takes, not with
// the due rows of sinks another instance holds. Before, an instance
// holding few sinks read every other sink's due row at every claim (5,000
// rows for 13 sinks of 500, docs/BENCHMARKS.md, session 16). Here 48 of
// 50 sinks, with 100 due rows each, are held by instance b; instance a's
// claim takes the other two sinks' rows, and the rows it reads of the
// outbox (pg_stat_xact_user_tables, its transaction's own counts) are a
// few per row it takes and per held sink, far fewer than the 4,800 due
// rows of the held sinks.
func TestAClaimReadsNotTheRowsOfSinksHeldElsewhere(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	f := storetest.NewFactory(t, pool)
	ctx := context.Background()
	const sinks, rowsEach, held = 50, 100, 48
	var ids []int64
	for i := range sinks {
		ids = append(ids, f.Sink(storetest.SinkOpts{Owner: notifytype.Human(fmt.Sprint(i/10 + 1))}))
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
		SELECT s, 'human:1', 'todo.dead_lettered', 'normal', '{}', now() - interval '1 minute' + k * interval '1 ms'
		FROM unnest($1::bigint[]) AS s, generate_series(1, $2::int) AS k`, ids, rowsEach)
	require.NoError(t, err)
	// Instance b, alive, holds one row of each of the first 48 sinks.
	require.NoError(t, store.Beat(ctx, pool, "instance-b", time.Now(), time.Hour, time.Minute))
	_, err = pool.Exec(ctx, `
		UPDATE switchboard.outbox SET state = 'claimed', claimed_by = 'instance-b', claim_expires_at = now() + interval '1 hour', claim_token = id
		WHERE id IN (SELECT min(id) FROM switchboard.outbox WHERE sink_id = ANY ($1::bigint[]) GROUP BY sink_id)`, ids[:held])
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE switchboard.outbox`)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`)
	require.NoError(t, err)
	before := outboxRowsRead(t, tx)
	rows, err := store.ClaimDue(ctx, tx, store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 64, PerSink: 32})
	require.NoError(t, err)
	read := outboxRowsRead(t, tx) - before

	t.Logf("the claim read %d rows of the outbox and took %d", read, len(rows))
	require.Len(t, rows, 64, "a takes the two free sinks' first 32 rows each")
	for _, r := range rows {
		require.Contains(t, ids[held:], r.SinkID, "a takes no row of a sink b holds")
	}
	require.Less(t, read, int64(held*rowsEach/4),
		"the claim read %d rows of the outbox to take %d: it passes the %d held sinks without reading their %d due rows", read, len(rows), held, held*(rowsEach-1))
}

// outboxRowsRead is how many rows of the outbox tx's statements have read
// so far, by index and by sequential scan.
func outboxRowsRead(t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
		WHERE schemaname = 'switchboard' AND relname = 'outbox'`).Scan(&n))
	return n
}

// Every statement that makes a row pending notes its sink, due no later
// than the row, in the same transaction: the notes' invariant, kept by
// the outbox's triggers whatever statement writes the row. Each way is
// taken on a sink with no note (its notes deleted first); the next claim
// takes the row. Without the note, the row would wait for good.
func TestEveryWayARowBecomesPendingIsNoted(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	ways := map[string]func(t *testing.T) int64{
		"fan-out": func(t *testing.T) int64 {
			emitDeadLetters(t, pool, sink, 1, 1)
			r, err := store.FanOut(ctx, pool, 500, time.Now(), hostReplaces)
			require.NoError(t, err)
			require.Equal(t, 1, r.Rows)
			return lastRow(t, pool, sink)
		},
		"rule's row": func(t *testing.T) int64 {
			ok, err := store.EnqueueForSinkTx(ctx, pool, sink, store.EmitParams{Owner: "human:1", EventType: "rule.notify",
				Severity: "normal", Payload: []byte(`{}`), DueAt: time.Now().Add(-time.Second)})
			require.NoError(t, err)
			require.True(t, ok)
			return lastRow(t, pool, sink)
		},
		"retry": func(t *testing.T) int64 {
			r := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
			require.NoError(t, store.FinishRows(ctx, pool, []store.Claimed{r}, "instance-a",
				store.RowOutcome{State: "pending", Class: "server", DueAt: time.Now().Add(-time.Second)}, time.Now(), hostReplaces))
			return r.ID
		},
		"recorded retry": func(t *testing.T) int64 {
			r := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
			require.NoError(t, store.RecordFinished(ctx, pool, []store.Finished{{Rows: []store.Claimed{r}, Status: "failed",
				Outcome: store.RowOutcome{State: "pending", Class: "server", DueAt: time.Now().Add(-time.Second)}, At: time.Now()}},
				"instance-a", hostReplaces))
			return r.ID
		},
		"release": func(t *testing.T) int64 {
			r := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
			n, err := store.ReleaseRows(ctx, pool, []store.Claimed{r}, "instance-a", hostReplaces)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			return r.ID
		},
		"give back unsent": func(t *testing.T) int64 {
			r := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
			started := startAttempt(t, pool, r)
			n, err := store.GiveBackUnsent(ctx, pool, []store.Unsent{{Row: r, RecordID: started.RecordID}}, "instance-a", hostReplaces)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			return r.ID
		},
		"due earlier": func(t *testing.T) int64 {
			id := openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)
			_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET due_at = now() + interval '1 hour' WHERE id = $1`, id)
			require.NoError(t, err)
			unnote(t, pool)
			_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET due_at = now() - interval '1 second' WHERE id = $1`, id)
			require.NoError(t, err)
			return id
		},
	}
	for name, way := range ways {
		t.Run(name, func(t *testing.T) {
			unnote(t, pool)
			id := way(t)
			var due time.Time
			require.NoError(t, pool.QueryRow(ctx, `SELECT due_at FROM switchboard.outbox WHERE id = $1 AND state = 'pending'`, id).Scan(&due))
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.due_sinks WHERE sink_id = $1 AND due_at <= $2`, sink, due),
				"the row's sink is noted, due no later than the row")

			rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 10, PerSink: 10})
			require.NoError(t, err)
			require.Len(t, rows, 1)
			require.Equal(t, id, rows[0].ID, "the next claim takes the row")
			deliver(t, pool, rows)
		})
	}
}

// A claim rewrites the notes of the sinks it took rows of, or found no
// due row of, and no other's: one note a sink, due at its first pending
// row the claim did not take, or none once it took them all. A sink left
// out of the claim (its mailbox full) keeps its notes, and a later claim
// takes its rows.
func TestAClaimRewritesTheNotesOfTheSinksItReads(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	f := storetest.NewFactory(t, pool)
	ctx := context.Background()
	owner := notifytype.Human("1")
	a, full := f.Sink(storetest.SinkOpts{Owner: owner}), f.Sink(storetest.SinkOpts{Owner: owner})
	now := time.Now()
	rowsOf := map[int64][]int64{}
	for i := range 6 {
		for _, sink := range []int64{a, full} {
			// One statement a row: each notes its sink (two notes of a
			// sink, or more, until a claim reads them).
			var id int64
			require.NoError(t, pool.QueryRow(ctx, `
				INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
				VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{}', $2) RETURNING id`,
				sink, now.Add(time.Duration(i-10)*time.Second)).Scan(&id))
			rowsOf[sink] = append(rowsOf[sink], id)
		}
	}
	notesOf := func(sink int64) []time.Time {
		rows, err := pool.Query(ctx, `SELECT due_at FROM switchboard.due_sinks WHERE sink_id = $1 ORDER BY due_at`, sink)
		require.NoError(t, err)
		due, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		return due
	}
	dueOf := func(id int64) time.Time {
		var due time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT due_at FROM switchboard.outbox WHERE id = $1`, id).Scan(&due))
		return due
	}
	require.Len(t, notesOf(full), 6)
	claim := func(skip ...int64) []store.OutboxRow {
		rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now, TTL: time.Minute, Limit: 10, PerSink: 4, SkipSinks: skip})
		require.NoError(t, err)
		return rows
	}

	rows := claim(full)
	require.Len(t, rows, 4, "a's first four rows")
	require.Equal(t, []time.Time{dueOf(rowsOf[a][4])}, notesOf(a), "one note, due at a's first row left")
	require.Len(t, notesOf(full), 6, "the sink left out keeps its notes")

	rows = claim()
	require.Len(t, rows, 6, "a's last two rows and the other sink's first four")
	require.Empty(t, notesOf(a), "a has no pending row left")
	require.Equal(t, []time.Time{dueOf(rowsOf[full][4])}, notesOf(full))

	rows = claim()
	require.Len(t, rows, 2, "the other sink's last two rows")
	require.Empty(t, notesOf(full))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE state = 'pending'`))

	// A note with no due row behind it (its rows taken by a claim that did
	// not see it, or its sink deleted) is rewritten by the claim that
	// reads it: none is left.
	gone := f.Sink(storetest.SinkOpts{Owner: owner})
	_, err := pool.Exec(ctx, `INSERT INTO switchboard.due_sinks (sink_id, due_at) VALUES ($1, $3), ($2, $3)`, a, gone, now.Add(-time.Hour))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM switchboard.sinks WHERE id = $1`, gone)
	require.NoError(t, err)
	require.Empty(t, claim())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.due_sinks`), "the claim cleared both notes")
}

// A claimer's next wake is its earliest note (migration 0030), which is
// never later than its earliest pending row: a row written for later
// wakes it at its due time, whether a fan-out or a claim wrote its note.
// A note earlier than every row (its rows taken by a claim that did not
// see it, or its sink deleted) wakes it early, once: the claim it makes
// then finds nothing and rewrites the note, and the next wake is the
// row's again.
func TestTheNextWakeIsTheEarliestNote(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	f := storetest.NewFactory(t, pool)
	ctx := context.Background()
	owner := notifytype.Human("1")
	sink, other := f.Sink(storetest.SinkOpts{Owner: owner}), f.Sink(storetest.SinkOpts{Owner: owner})
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	wake := func() time.Time {
		t.Helper()
		next, ok, err := store.NextWake(ctx, pool, "instance-a")
		require.NoError(t, err)
		require.True(t, ok, "a pending row is due later")
		return next
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
		VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{}', $2::timestamptz + interval '1 hour'),
		       ($1, 'human:1', 'todo.dead_lettered', 'normal', '{}', $2::timestamptz + interval '2 hours')`, sink, now)
	require.NoError(t, err)
	require.True(t, wake().Equal(now.Add(time.Hour)), "the fan-out's note: %v", wake())

	// The first row is taken: the claim's note is at the second.
	rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now.Add(time.Hour), TTL: time.Minute, Limit: 1, PerSink: 1})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	deliver(t, pool, rows)
	require.True(t, wake().Equal(now.Add(2*time.Hour)), "the claim's note: %v", wake())

	// A stale note, earlier than any row, wakes the claimer once.
	_, err = pool.Exec(ctx, `INSERT INTO switchboard.due_sinks (sink_id, due_at) VALUES ($1, $2)`, other, now.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, wake().Equal(now.Add(time.Minute)), "the stale note: %v", wake())
	rows, err = store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now.Add(time.Minute), TTL: time.Minute, Limit: 10, PerSink: 4})
	require.NoError(t, err)
	require.Empty(t, rows, "nothing is due at the stale note")
	require.True(t, wake().Equal(now.Add(2*time.Hour)), "the stale note is gone: %v", wake())
}

// unnote deletes every note: the sinks' pending rows are then found only
// by notes written from here on.
func unnote(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `DELETE FROM switchboard.due_sinks`)
	require.NoError(t, err)
}

// lastRow is the id of sink's newest outbox row.
func lastRow(t *testing.T, pool *pgxpool.Pool, sink int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT max(id) FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&id))
	return id
}
