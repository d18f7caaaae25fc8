package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// One fan-out runs at a time across instances: while another instance's
// fan-out holds the lock (here a transaction of the test's), a fan-out
// takes no event and leaves every one waiting, and once that transaction
// ends the next fan-out takes them all. (Two at once wait on each other in
// the outbox's indexes: fanOutSQL.)
func TestFanOutsTakeTurnsAcrossInstances(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	emit := func(from, n int) { emitDeadLetters(t, pool, sink, from, n) }
	emit(1, 3)
	waiting := func() (events, rows int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM switchboard.outbox_events),
			(SELECT count(*) FROM switchboard.outbox)`).Scan(&events, &rows))
		return events, rows
	}

	other, err := pool.Begin(ctx) // another instance's fan-out, under way
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, store.LockFamilyFanOut)
	require.NoError(t, err)

	r, err := store.FanOut(ctx, pool, 500, time.Now(), hostReplaces)
	require.NoError(t, err)
	require.Zero(t, r.Events, "a fan-out runs while another holds the turn")
	events, rows := waiting()
	require.Equal(t, 3, events, "the events wait for the next turn")
	require.Zero(t, rows)

	// A claim cycle's fan-out skips its turn the same way, and still claims.
	fr, claimed, err := store.FanOutAndClaim(ctx, pool, 500, store.ClaimParams{
		Instance: "turns", Now: time.Now(), TTL: time.Minute, Limit: 10, PerSink: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Events)
	require.Empty(t, claimed)

	require.NoError(t, other.Rollback(ctx))
	r, err = store.FanOut(ctx, pool, 500, time.Now(), hostReplaces)
	require.NoError(t, err)
	require.Equal(t, 3, r.Events, "the next fan-out takes every event")
	events, rows = waiting()
	require.Zero(t, events)
	require.Equal(t, 3, rows)

	// The turn ends with the fan-out's transaction: a fan-out inside a
	// transaction holds it until that transaction ends.
	emit(4, 1)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		r, err := store.FanOut(ctx, tx, 500, time.Now(), hostReplaces)
		require.NoError(t, err)
		require.Equal(t, 1, r.Events)
		var free bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, 0)`, store.LockFamilyFanOut).Scan(&free))
		require.False(t, free, "held while the fan-out's transaction lasts")
		return nil
	}))
	var free bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, 0)`, store.LockFamilyFanOut).Scan(&free))
	require.True(t, free, "released when it ends")
}
