package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// Every janitor delete finds its batch through an index on the rows' age,
// not by scanning the table: with sequential scans off, the plan of each
// batch's SELECT must be an index scan.
func TestPruneExpiredUsesAnIndexForEveryTable(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	selects := store.ExpirySelectsForTest()
	want := map[string]string{
		"delivery records":     "delivery_records_age",
		"finished outbox rows": "outbox_finished",
		"write log rows":       "write_log_age",
		"digest runs":          "digest_runs_age",
	}
	ageColumn := map[string]string{
		"delivery records": "sent_at", "finished outbox rows": "finished_at", "write log rows": "at",
		"digest runs": "ran_at",
	}
	require.Len(t, selects, len(want))
	for what, sel := range selects {
		text := explain(t, conn, sel, time.Now(), 1000)
		require.Contains(t, text, "Index", "%s: %s", what, text)
		require.Regexp(t, `(using|on) `+want[what]+`\b`, text, "%s is found by its age index", what)
		require.Contains(t, text, "Index Cond: ("+ageColumn[what]+" < ", "%s: the index bounds the age", what)
		require.NotContains(t, text, "Seq Scan", "%s: %s", what, text)
	}
}

// PruneExpired deletes in batches until nothing older than the cut-off is
// left, whatever the batch size, and keeps everything newer.
func TestPruneExpiredDeletesInBatches(t *testing.T) {
	t.Parallel()
	pool := storetest.New(t)
	ctx := context.Background()
	f := storetest.NewFactory(t, pool)
	now := time.Now().UTC()
	old, fresh := now.Add(-31*24*time.Hour), now.Add(-29*24*time.Hour)
	_, err := pool.Exec(ctx, `INSERT INTO switchboard.write_log (at, owner, action, object_kind, object_id)
		SELECT CASE WHEN g <= 7 THEN $1::timestamptz ELSE $2::timestamptz END, 'human:1', 'sink.create', 'sink', g
		FROM generate_series(1, 10) g`, old, fresh)
	require.NoError(t, err)

	x, err := store.PruneExpired(ctx, pool, now.Add(-30*24*time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, store.Expired{Writes: 7}, x, "7 old rows in batches of 3, 3 and 1")
	require.Equal(t, 3, f.Count(`SELECT count(*) FROM switchboard.write_log`))
	require.Zero(t, f.Count(`SELECT count(*) FROM switchboard.write_log WHERE at < $1`, now.Add(-30*24*time.Hour)))
	require.Equal(t, int64(7), x.Total())

	// A batch size that divides the backlog exactly ends with an empty batch.
	_, err = pool.Exec(ctx, `INSERT INTO switchboard.write_log (at, owner, action, object_kind, object_id)
		SELECT $1, 'human:1', 'sink.create', 'sink', g FROM generate_series(1, 6) g`, old)
	require.NoError(t, err)
	x, err = store.PruneExpired(ctx, pool, now.Add(-30*24*time.Hour), 3)
	require.NoError(t, err)
	require.Equal(t, int64(6), x.Writes)
	require.Equal(t, 3, f.Count(`SELECT count(*) FROM switchboard.write_log`))
}
