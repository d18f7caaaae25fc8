package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// A claim that may take only PerSink rows of a sink takes the ones that
// fell due first, by due time and then by id, whatever order the rows
// were written in: the rows written last here fell due first.
func TestAClaimTakesASinksRowsInTheOrderTheyFellDue(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	var ids []int64 // ids[i] falls due i seconds before now
	for i := range 5 {
		id := openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)
		_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET due_at = $2 WHERE id = $1`, id, now.Add(-time.Duration(i)*time.Second))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: now, TTL: time.Minute, Limit: 10, PerSink: 2})
	require.NoError(t, err)
	got := map[int64]bool{}
	for _, r := range rows {
		got[r.ID] = true
	}
	require.Equal(t, map[int64]bool{ids[4]: true, ids[3]: true}, got, "the two rows of the sink that fell due first")
}
