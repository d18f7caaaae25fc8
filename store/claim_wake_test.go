package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// A claimer's cycle in one round trip: FanOutClaimAndWake reads the sinks
// whose held rows are due and the next wake after its claim, as
// HeldDueSinks and NextWake read them once it has committed: the rows it
// claimed count by their claims' expiry, not as due.
func TestFanOutClaimAndWakeReadsWhatTheCycleLeft(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state)
		VALUES ($1, 'human:1', 'dead_letter', 'normal', '{}', $2, 'pending'),
		       ($1, 'human:1', 'dead_letter', 'normal', '{}', $2 + interval '1 hour', 'pending'),
		       ($1, 'human:1', 'dead_letter', 'normal', '{}', $2 - interval '1 second', 'held')`, sink, now)
	require.NoError(t, err)

	p := store.ClaimParams{Instance: "instance-a", Now: now, TTL: 10 * time.Minute, Limit: 10, PerSink: 5, Replaces: hostReplaces}
	_, rows, w, err := store.FanOutClaimAndWake(ctx, pool, 100, p, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the due row is claimed; the later one is not due")
	require.Equal(t, []int64{sink}, w.HeldSinks)
	require.True(t, w.HasNext)

	held, err := store.HeldDueSinks(ctx, pool, now, 10)
	require.NoError(t, err)
	require.Equal(t, held, w.HeldSinks)
	next, ok, err := store.NextWake(ctx, pool, p.Instance)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, next.Equal(w.Next), "next wake %v, read after the commit %v", w.Next, next)
	require.True(t, w.Next.Equal(now.Add(-time.Second)), "the held row is the earliest: %v", w.Next)

	// Without held rows, the earliest is the later row: the instance's own
	// claims do not wake it (its rows are queued or in flight here; a lost
	// one is found at its next poll), and the row just claimed is not due.
	_, err = pool.Exec(ctx, `DELETE FROM switchboard.outbox WHERE state = 'held'`)
	require.NoError(t, err)
	p.Now = now.Add(time.Second)
	_, rows, w, err = store.FanOutClaimAndWake(ctx, pool, 100, p, 10)
	require.NoError(t, err)
	require.Empty(t, rows)
	require.Empty(t, w.HeldSinks)
	require.True(t, w.HasNext)
	require.True(t, w.Next.Equal(now.Add(time.Hour)), "the later row, not the instance's own claim: %v", w.Next)

	// Another instance's claim wakes it when it expires, whether that
	// instance's name sorts before or after its own.
	_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'delivered', claimed_by = NULL, claim_expires_at = NULL, claim_token = NULL
		WHERE claimed_by = $1`, p.Instance)
	require.NoError(t, err)
	for _, other := range []string{"instance-0", "instance-b"} {
		q := store.ClaimParams{Instance: other, Now: now.Add(time.Hour), TTL: 10 * time.Minute, Limit: 10, PerSink: 5, Replaces: hostReplaces}
		_, rows, _, err = store.FanOutClaimAndWake(ctx, pool, 100, q, 10)
		require.NoError(t, err)
		require.Len(t, rows, 1, "%s claims the later row", other)
		next, ok, err = store.NextWake(ctx, pool, p.Instance)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, next.Equal(now.Add(time.Hour+10*time.Minute)), "%s's claim expires: %v", other, next)
		_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'pending', claimed_by = NULL, claim_expires_at = NULL, claim_token = NULL
			WHERE claimed_by = $1`, other)
		require.NoError(t, err)
	}
}

// The claim locks the rows it picked by their primary key: with a deep
// backlog, a join of its few hundred picks against the outbox was planned
// as a hash join over a scan of the whole outbox (20,000 rows read for
// each claim of 256, 40 or 8 rows: most of a drain's claim time).
func TestTheClaimLocksItsPicksByID(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
		SELECT $1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now() - interval '1 hour' + g * interval '1 ms'
		FROM generate_series(1, 20000) g`, sink)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE switchboard.outbox`)
	require.NoError(t, err)
	// The plan the engine runs the claim on is generic (genericPlans): it
	// knows neither the limit nor the instant, so one plan stands for any.
	sql, args := store.ClaimDueForTest(store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 256, PerSink: 256})
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	text := explainGeneric(t, tx, sql, len(args))
	start, end := strings.Index(text, "CTE chosen"), strings.Index(text, "CTE claimed")
	require.True(t, start >= 0 && end > start, text)
	chosen := text[start:end]
	require.Contains(t, chosen, "Index Scan using outbox_pkey on outbox o", "the picks are locked by id:\n%s", text)
	require.NotContains(t, chosen, "Seq Scan", text)
	require.Contains(t, text, "Index Cond: (due_at <= $2)", "the generic plan:\n%s", text)
}

// A claim that takes over no row reads no delivery record: the records of
// attempts abandoned under an old claim are looked for only when the claim
// took a row over from one. On the engine's generic plan, with statistics
// from when the table was small, the look-up was a scan of every record at
// every claim (15,000 of them a claim, late in a drain of 20,000 rows,
// docs/BENCHMARKS.md, session 24). Counted by the claim's own transaction
// (pg_stat_xact_user_tables), with records to find and none to take.
func TestAClaimThatTakesNothingOverReadsNoRecord(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO switchboard.delivery_records (sink_id, owner, event_type, attempt, status, sent_at, finished_at)
		SELECT $1, 'human:1', 'dead_letter', 1, s, now(), CASE WHEN s <> 'sending' THEN now() END
		FROM generate_series(1, 200) g, unnest(ARRAY['sending', 'delivered']) s`, sink)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at)
		SELECT $1, 'human:1', 'dead_letter', 'normal', '{"title": "t"}', now() - interval '1 hour' + g * interval '1 ms'
		FROM generate_series(1, 50) g`, sink)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := store.ClaimDue(ctx, tx, store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 256, PerSink: 256})
	require.NoError(t, err)
	require.Len(t, rows, 50, "every due row claimed")
	var seq, idx int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables
		WHERE schemaname = 'switchboard' AND relname = 'delivery_records'`).Scan(&seq, &idx))
	require.Zero(t, seq+idx, "the claim scanned delivery_records %d times and looked it up by index %d times", seq, idx)
}
