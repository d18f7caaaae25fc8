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

// A flush takes no held row while its instance holds a row of the sink
// whose attempt has not begun under its claim: that row is queued for the
// sink's actor and goes first, in its turn. The claimer can claim and queue
// it after the actor chose the flush (its mailbox was empty then), and the
// coalesced message overtook it (found by the state machine). Once the
// row's attempt begins, or when the queued row is another instance's (D9:
// a held row goes out while another instance's claims wait), the flush
// takes the held rows.
func TestAFlushWaitsForTheRowsItsInstanceQueued(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	heldRow(t, pool, sink)
	require.NoError(t, store.Beat(ctx, pool, "instance-b", now, time.Hour, time.Minute))
	flush := func(instance string) int {
		rows, err := store.ClaimHeld(ctx, pool, sink, instance, now, time.Minute, 7, time.Time{})
		require.NoError(t, err)
		if len(rows) > 0 {
			// Held again, for the next try.
			_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'held', claimed_by = NULL, claim_token = NULL,
				claim_expires_at = NULL WHERE id = $1`, rows[0].ID)
			require.NoError(t, err)
		}
		return len(rows)
	}

	queued := claimedRow(t, pool, sink, "instance-a", 51, "", false) // a claim alone, an hour after its last attempt
	require.Zero(t, flush("instance-a"), "its own queued row goes first")
	require.Equal(t, 1, flush("instance-b"), "another instance's queued row does not hold it")

	startAttempt(t, pool, queued)
	require.Equal(t, 1, flush("instance-a"), "the queued row's attempt began")
}

// A row taken over from a dead instance, its abandoned attempt closed by
// the claim that took it, is queued here until its own attempt begins:
// the abandoned attempt's record is not its start, even when it was sent
// at the very instant the row was taken over, so that its sent_at plus
// the claim's time equals the new claim's end (a frozen test clock gives
// that instant; the state machine saw a flush send held rows ahead of
// such a row of the same sink, due before them).
func TestAFlushWaitsForARowTakenOverAtTheInstantItsAbandonedAttemptBegan(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	heldRow(t, pool, sink)
	require.NoError(t, store.Beat(ctx, pool, "instance-b", now, time.Hour, time.Minute))
	taken := claimedRow(t, pool, sink, "instance-b", 52, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET claim_expires_at = $2::timestamptz + interval '1 minute', attempts = 2 WHERE id = $1`,
		taken.ID, now)
	require.NoError(t, err)
	// The dead instance's attempt, closed as abandoned by the takeover.
	_, err = pool.Exec(ctx, `INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, attempt, status, class, sent_at, finished_at)
		VALUES ($1, 'human:1', $2, 'todo.dead_lettered', 2, 'failed', 'abandoned', $3, $3)`, sink, taken.ID, now)
	require.NoError(t, err)

	rows, err := store.ClaimHeld(ctx, pool, sink, "instance-b", now, time.Minute, 7, time.Time{})
	require.NoError(t, err)
	require.Empty(t, rows, "the row taken over goes first")

	startAttemptAs(t, pool, taken, "instance-b", now)
	rows, err = store.ClaimHeld(ctx, pool, sink, "instance-b", now, time.Minute, 7, time.Time{})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the row taken over has begun its own attempt")
}

// A flush waits for a claim of its own instance in flight: the claim's
// rows are not in a snapshot taken before it commits, and a flush that
// looked meanwhile sent a held row ahead of rows the claim had just taken
// for the same sink, due before it (the state machine: a held retry sent
// under claim token 386 while rows claimed under 385 waited in the
// actor's mailbox). Once the claim commits, the flush finds the claimed
// row queued here and takes nothing.
func TestAFlushWaitsForTheClaimInFlightOfItsInstance(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	heldRow(t, pool, sink)
	openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)

	claim, err := pool.Begin(ctx)
	require.NoError(t, err)
	flush, err := pool.Begin(ctx)
	require.NoError(t, err)
	type flushed struct {
		rows []store.OutboxRow
		err  error
	}
	var (
		done     = make(chan flushed, 1)
		finished chan struct{} // closed when the flush's goroutine has returned
	)
	t.Cleanup(func() {
		_ = claim.Rollback(ctx) // lets a flush still waiting go on
		if finished != nil {
			<-finished
		}
		_ = flush.Rollback(ctx)
	})

	claimed, err := store.ClaimDue(ctx, claim, store.ClaimParams{Instance: "instance-a", Now: now.Add(time.Second), TTL: time.Minute, Limit: 10, PerSink: 5})
	require.NoError(t, err)
	require.Len(t, claimed, 1, "the claim takes the pending row")

	pid := flush.Conn().PgConn().PID()
	finished = make(chan struct{})
	go func() {
		defer close(finished)
		rows, err := store.ClaimHeld(ctx, flush, sink, "instance-a", now, time.Minute, 7, time.Time{})
		done <- flushed{rows, err}
	}()
	for waiting := false; !waiting; {
		select {
		case f := <-done:
			t.Fatalf("the flush did not wait for the claim in flight: it took %d held rows (error: %v)", len(f.rows), f.err)
		default:
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)`, pid).Scan(&waiting))
	}
	require.NoError(t, claim.Commit(ctx))
	f := <-done
	require.NoError(t, f.err)
	require.Empty(t, f.rows, "the row the claim took is queued here, and goes first")
}

// A flush takes no held row while a pending row of the sink fell due
// before it: that row goes first, in its turn, claimed as the claimer
// reaches it (and held with the others, to be coalesced, if no token is
// left for it). A flush that did not wait sent the held row ahead of it
// whenever the claimer was slower than the token's return: its sink left
// to the once-a-second search for rows to take over, or a pick locked by
// another claim (the state machine: a held row sent at its token's time
// while two rows of the sink, due 50 s before it and never attempted,
// waited pending). Held rows due before the first pending row go, and
// the rest wait with it; a pending row due after them all holds up none.
func TestAFlushWaitsForThePendingRowsDueBeforeIt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, "instance-a", now, time.Hour, time.Minute))
	row := func(state string, due time.Duration) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `
			INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, attempts, first_attempt_at)
			VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{"title": "t"}', $2::timestamptz + $3::interval, $4,
			        CASE WHEN $4 = 'held' THEN 1 ELSE 0 END, CASE WHEN $4 = 'held' THEN $2::timestamptz - interval '1 hour' END)
			RETURNING id`, sink, now, due, state).Scan(&id))
		return id
	}
	flush := func() []int64 {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }() // each flush is tried on the same rows
		rows, err := store.ClaimHeld(ctx, tx, sink, "instance-a", now, time.Minute, 7, time.Time{})
		require.NoError(t, err)
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids
	}

	first := row("held", -3*time.Minute)
	later := row("pending", -time.Minute) // due after the held row: holds up nothing
	require.Equal(t, []int64{first}, flush(), "the held row fell due first")

	second := row("held", -30*time.Second)
	require.Equal(t, []int64{first}, flush(), "the held row due after the pending one waits for it")

	earlier := row("pending", -4*time.Minute)
	require.Empty(t, flush(), "a pending row fell due before every held row")

	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'delivered', finished_at = $3 WHERE id = ANY ($1) AND sink_id = $2`,
		[]int64{earlier, later}, sink, now)
	require.NoError(t, err)
	require.Equal(t, []int64{first, second}, flush(), "the pending rows went: every held row goes")
}
