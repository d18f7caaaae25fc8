package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// A delivery record for rows is written, and linked from them, only under
// the claim that holds them: an instance whose claim expired, and whose
// row another instance (or a newer claim of its own) took, writes nothing
// for it (on e6a7fa7 the record was written and re-linked the other
// claim's row).
func TestDeliveryRecordIsWrittenOnlyUnderTheRowsClaim(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	records := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.delivery_records`).Scan(&n))
		return n
	}
	linked := func(id int64) *int64 {
		var rec *int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT attempt_record_id FROM switchboard.outbox WHERE id = $1`, id).Scan(&rec))
		return rec
	}
	rec := func(rows []store.Claimed, instance string) (int64, error) {
		return store.InsertDeliveryRecord(ctx, pool, store.DeliveryRecord{
			SinkID: sink, Owner: "human:1", EventType: "todo.dead_lettered", Attempt: 1, SentAt: time.Now(),
			Rows: rows, Instance: instance,
		})
	}
	theirs := claimedRow(t, pool, sink, "instance-b", 2, "", false)
	mine := claimedRow(t, pool, sink, "instance-a", 3, "", false)
	for name, rows := range map[string][]store.Claimed{
		"another instance's row":        {{ID: theirs.ID, Token: 1}},
		"another instance's claim":      {theirs},
		"an older claim of its own row": {{ID: mine.ID, Token: 1}},
		"one row of several":            {mine, {ID: theirs.ID, Token: 1}},
	} {
		_, err := rec(rows, "instance-a")
		require.ErrorIs(t, err, store.ErrClaimLost, name)
		require.Zero(t, records(), name)
		require.Nil(t, linked(theirs.ID), name)
		require.Nil(t, linked(mine.ID), name)
	}

	id, err := rec([]store.Claimed{mine}, "instance-a")
	require.NoError(t, err)
	require.Equal(t, 1, records())
	require.NotNil(t, linked(mine.ID))
	require.Equal(t, id, *linked(mine.ID))

	// A record for no row (a test message) needs no claim.
	_, err = rec(nil, "")
	require.NoError(t, err)
}
