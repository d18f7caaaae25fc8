package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// An embedder's database has the engine's schema and none of the
// reference host's tables (no "endpoints"): notify_owner's page count
// works there, and two concurrent callers still count one at a time, so
// the count never overshoots its limit across instances. On e6a7fa7 the
// count locked the host's endpoints row, and failed here.
func TestAgentPageCountIsSerialisedInsideTheEnginesSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, storetest.EmptyURL(t))
	require.NoError(t, store.MigrateEngine(ctx, pool))
	var hostTable bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('endpoints') IS NOT NULL`).Scan(&hostTable))
	require.False(t, hostTable, "an embedder's database: no endpoints table")

	const endpoint, limit = 7, 5
	now := time.Now()
	since := now.Add(-time.Hour)
	_, err := pool.Exec(ctx, `INSERT INTO switchboard.agent_pages (endpoint_id, paged_at) SELECT $1, $2 FROM generate_series(1, $3)`,
		endpoint, now.Add(-time.Minute), limit-1)
	require.NoError(t, err)

	// The first caller counts the last page the window allows and has not
	// committed yet.
	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Rollback(ctx) })
	ok, _, err := store.RecordAgentPage(ctx, first, endpoint, now, since, limit)
	require.NoError(t, err)
	require.True(t, ok)

	// The second, on another connection, waits for it.
	type answer struct {
		ok  bool
		err error
	}
	second := make(chan answer, 1)
	go func() {
		tx, err := pool.Begin(ctx)
		if err != nil {
			second <- answer{err: err}
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		ok, _, err := store.RecordAgentPage(ctx, tx, endpoint, now, since, limit)
		if err == nil {
			err = tx.Commit(ctx)
		}
		second <- answer{ok, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond, "the second caller waits for the first one's count")
	require.NoError(t, first.Commit(ctx))

	a := <-second
	require.NoError(t, a.err)
	require.False(t, a.ok, "the window is full once the first page committed")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.agent_pages WHERE endpoint_id = $1`, endpoint).Scan(&n))
	require.Equal(t, limit, n, "no overshoot")

}
