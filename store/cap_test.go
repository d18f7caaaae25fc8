package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// The cap of 7 attempts holds on the coalesced path too: a recorder that
// puts a row at its cap back to held between FinishHeldAtCap and ClaimHeld
// (an outcome written late) cannot give it an eighth attempt. ClaimHeld
// itself leaves rows at the cap (on e6a7fa7 it counted an eighth), and
// the schema refuses an eighth attempt whatever a statement says.
func TestClaimHeldNeverStartsAnEighthAttempt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	var fresh int64
	require.NoError(t, pool.QueryRow(ctx, `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, attempts, first_attempt_at)
		VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{"title": "t"}', now() - interval '1 minute', 'held', 2, now() - interval '1 hour')
		RETURNING id`, sink).Scan(&fresh))
	// A row at its seventh attempt, still claimed: its outcome is on its way.
	late := claimedRow(t, pool, sink, "instance-a", 41, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET attempts = 7 WHERE id = $1`, late.ID)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	capped, err := store.FinishHeldAtCap(ctx, tx, sink, 7, now)
	require.NoError(t, err)
	require.Empty(t, capped, "no held row is at its cap yet")

	// Between the two statements the recorder writes the late outcome: a
	// failure the budget holds (held again, at seven attempts).
	b := &pgx.Batch{}
	store.QueueHoldRows(b, []store.Hold{{Row: late, SinkID: sink, Until: now.Add(-time.Second)}}, "instance-a", map[int64]int{}, hostReplaces)
	require.NoError(t, pool.SendBatch(ctx, b).Close())

	require.NoError(t, store.Beat(ctx, pool, "instance-b", now, time.Hour, time.Minute)) // its heartbeat lets it dispatch
	rows, err := store.ClaimHeld(ctx, tx, sink, "instance-b", now, time.Minute, 7, time.Time{})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Len(t, rows, 1)
	require.Equal(t, fresh, rows[0].ID)
	require.Equal(t, 3, rows[0].Attempts)
	var state string
	var attempts int
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, attempts FROM switchboard.outbox WHERE id = $1`, late.ID).Scan(&state, &attempts))
	require.Equal(t, "held", state, "left for the next flush to end at the cap")
	require.Equal(t, 7, attempts)

	// The schema refuses an eighth attempt.
	_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET attempts = attempts + 1 WHERE id = $1`, late.ID)
	require.ErrorContains(t, err, "outbox_attempts_cap")
}
