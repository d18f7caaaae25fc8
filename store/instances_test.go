package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// An instance whose heartbeat no longer lets it dispatch starts no
// attempt, whatever statement it uses (issue 23, defect 4): the group
// start, the single-row start and the coalesced message's claim of held
// rows each carry store.DispatchFence, checked at the database's clock
// when the statement runs. The same statements start attempts once it
// beats again.
func TestAnInstanceWhoseHeartbeatLapsedStartsNoAttempt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	const lapsed = "instance-lapsed"
	now := time.Now()
	// Its last beat was 30 s ago: it could dispatch until 10 s ago; its
	// rows are its own for 13 s more (the fence).
	require.NoError(t, store.Beat(ctx, pool, lapsed, now.Add(-30*time.Second), 20*time.Second, 23*time.Second))
	row := claimedRow(t, pool, sink, lapsed, 2001, "", false)
	_, err := pool.Exec(ctx, `INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state)
		VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{}', now() - interval '1 minute', 'held')`, sink) // due before now: ClaimHeld takes only due rows
	require.NoError(t, err)

	// The single-row start writes no record (its caller does), and closes
	// the one an earlier start left open: it goes first, so that the
	// group start's record is the attempt that began, the row no longer
	// queued, when the flush looks (queuedHere).
	starts := func() (group int, single error, held int) {
		_, _, single = store.StartAttempt(ctx, pool, row, lapsed, now, time.Minute, 7)
		var started []store.StartedRow
		b := &pgx.Batch{}
		store.QueueStartAttempts(b, []store.Start{{Row: row, TAT: now}}, lapsed, now, time.Minute, 7, &started, time.Time{})
		require.NoError(t, pool.SendBatch(ctx, b).Close())
		rows, err := store.ClaimHeld(ctx, pool, sink, lapsed, now, time.Minute, 7, time.Time{})
		require.NoError(t, err)
		return len(started), single, len(rows)
	}
	may, err := store.MayDispatch(ctx, pool, lapsed, time.Time{})
	require.NoError(t, err)
	require.False(t, may)
	group, single, held := starts()
	require.Zero(t, group, "the group start is fenced")
	require.ErrorIs(t, single, store.ErrClaimLost, "the single-row start is fenced")
	require.Zero(t, held, "the coalesced message's claim is fenced")
	require.Equal(t, 1, count(t, pool, `SELECT attempts FROM switchboard.outbox WHERE id = $1`, row.ID))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records`))

	// Not yet another instance's: the fence has not passed.
	taken, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-b", Now: now, TTL: time.Minute, Limit: 10, PerSink: 5})
	require.NoError(t, err)
	require.Empty(t, taken, "its rows are taken only a fence after it stopped dispatching")

	// It beats again: the same statements start.
	require.NoError(t, store.Beat(ctx, pool, lapsed, now, 20*time.Second, 23*time.Second))
	group, single, held = starts()
	require.Equal(t, 1, group)
	require.NoError(t, single)
	require.Equal(t, 1, held)
}

// A claim takes a lapsed instance's rows only from alive_until, a fence
// after its dispatch_until (Beat), and never while a beat is writing
// its heartbeat row (FOR SHARE SKIP LOCKED: the instance may be about to
// dispatch again).
func TestATakeoverWaitsForTheFenceAndForABeatUnderWay(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	const lapsed = "instance-gone"
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, lapsed, now.Add(-50*time.Second), 20*time.Second, 23*time.Second))
	row := claimedRow(t, pool, sink, lapsed, 3001, "", false)
	params := store.ClaimParams{Instance: "instance-b", Now: now, TTL: time.Minute, Limit: 10, PerSink: 5}

	// A beat under way holds its row: the claim leaves the instance alone.
	beat, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = beat.Rollback(context.Background()) }) // even when a check fails: the pool closes
	_, err = beat.Exec(ctx, `UPDATE switchboard.outbox_instances SET alive_until = alive_until WHERE name = $1`, lapsed)
	require.NoError(t, err)
	taken, err := store.ClaimDue(ctx, pool, params)
	require.NoError(t, err)
	require.Empty(t, taken, "a claim does not judge dead an instance whose beat is under way")
	require.NoError(t, beat.Rollback(ctx))

	// 50 s after its last beat, past its 20 s and the 23 s fence: taken.
	taken, err = store.ClaimDue(ctx, pool, params)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.Equal(t, row.ID, taken[0].ID)
}
