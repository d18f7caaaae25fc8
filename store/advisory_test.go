package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// The engine's advisory locks are two-key locks of its own families: an
// embedder's one-key locks (pg_advisory_lock(bigint)), whatever their key,
// never meet them.
func TestTheEnginesAdvisoryLocksStayOutOfTheOneKeySpace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.New(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	require.NoError(t, store.LockOwnerScope(ctx, tx, notifytype.Human("7")))

	rows, err := tx.Query(ctx, `SELECT classid::bigint, objsubid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`)
	require.NoError(t, err)
	type lock struct{ Classid, Objsubid int64 }
	locks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lock])
	require.NoError(t, err)
	require.Equal(t, []lock{{Classid: int64(store.LockFamilyOwner), Objsubid: 2}}, locks,
		"one lock, of the two-key form (objsubid 2), in the owner family")
}
