package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// Every statement that starts an attempt carries the dispatch fence: an
// instance whose heartbeat no longer lets it dispatch (dispatch_until
// passed) starts none, whatever its code decided before; once it beats
// again, each starts. (Issue 23, defect 4: the fence is what lets another
// instance take its rows later without racing a send.)
func TestAnInstancePastItsDispatchFenceStartsNoAttempt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	const instance = "instance-z"
	require.NoError(t, store.Beat(ctx, pool, instance, now.Add(-2*time.Hour), 20*time.Second, time.Minute))
	row := claimedRow(t, pool, sink, instance, 2001, "", false)
	// The held row is another sink's: a flush waits for the rows its
	// instance queued for the same sink (TestAFlushWaitsForTheRowsItsInstanceQueued).
	other := storetest.NewFactory(t, pool).Sink(storetest.SinkOpts{Owner: notifytype.Human("1")})
	heldRow(t, pool, other)

	starts := func() (group, single, coalesced int) {
		var started []store.StartedRow
		b := &pgx.Batch{}
		store.QueueStartAttempts(b, []store.Start{{Row: row, TAT: now}}, instance, now, time.Minute, 7, &started, time.Time{})
		require.NoError(t, pool.SendBatch(ctx, b).Close())
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		if _, _, err := store.StartAttempt(ctx, tx, row, instance, now, time.Minute, 7); err == nil {
			single = 1
		} else {
			require.ErrorIs(t, err, store.ErrClaimLost)
		}
		rows, err := store.ClaimHeld(ctx, tx, other, instance, now, time.Minute, 7, time.Time{})
		require.NoError(t, err)
		return len(started), single, len(rows)
	}
	g, s, c := starts()
	require.Zero(t, g, "the group reservation's start")
	require.Zero(t, s, "StartAttempt")
	require.Zero(t, c, "ClaimHeld")
	require.Equal(t, 1, count(t, pool, `SELECT attempts FROM switchboard.outbox WHERE id = $1`, row.ID), "no attempt counted")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records`), "no attempt recorded")

	require.NoError(t, store.Beat(ctx, pool, instance, now, 20*time.Second, time.Minute))
	g, s, c = starts()
	require.Equal(t, []int{1, 1, 1}, []int{g, s, c}, "once it beats, each statement starts its attempt")
}

// An instance whose heartbeat lapsed keeps its rows a fence longer (the
// longest send, the record grace, one beat): no claim takes them at once
// until then, so that a send it began before the lapse is recorded, not
// raced; after the fence a claim takes them at once, before their own
// claims expire.
func TestRowsOfALapsedInstanceAreTakenOnlyAFenceLater(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	// Its last beat 30 s ago: it may dispatch until 10 s ago, and is alive
	// to the others until 50 s from now.
	require.NoError(t, store.Beat(ctx, pool, "instance-y", now.Add(-30*time.Second), 20*time.Second, time.Minute))
	row := claimedRow(t, pool, sink, "instance-y", 3001, "", false) // its claim runs a minute

	claim := func(at time.Time) []store.OutboxRow {
		rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-b", Now: at, TTL: time.Minute, Limit: 10, PerSink: 5})
		require.NoError(t, err)
		return rows
	}
	require.Empty(t, claim(now), "inside the fence the lapsed instance's row stays its own")
	rows := claim(now.Add(55 * time.Second))
	require.Len(t, rows, 1, "a fence later it is taken at once, its claim not expired")
	require.Equal(t, row.ID, rows[0].ID)
}
