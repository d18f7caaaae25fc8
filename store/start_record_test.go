package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/store"
)

// An attempt's start writes its delivery record and nothing to its row
// (startAttemptsSQL): the attempt is counted by its outcome. These tests
// hold the guards that moved with the count: the claim outlasts the send,
// no takeover meets a start, an outcome counts its attempt, and an attempt
// that never had one is counted before the next starts.

// startWith starts an attempt on r as a group reservation does, with ttl,
// and returns what started.
func startWith(t *testing.T, pool *pgxpool.Pool, r store.Claimed, ttl time.Duration) []store.StartedRow {
	t.Helper()
	var started []store.StartedRow
	b := &pgx.Batch{}
	store.QueueStartAttempts(b, []store.Start{{Row: r, TAT: time.Now()}}, "instance-a", time.Now(), ttl, 7, &started, time.Time{})
	require.NoError(t, pool.SendBatch(context.Background(), b).Close())
	return started
}

// xmin is the id of the transaction that wrote the row's current version.
func xmin(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var x string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT xmin::text FROM switchboard.outbox WHERE id = $1`, id).Scan(&x))
	return x
}

// A start right after its claim, as in a drain, writes the attempt's
// "sending" record, numbered after the row's attempts, and no version of
// the row: the row is written three times a delivery (fan-out, claim,
// outcome), not four.
func TestAStartWritesOnlyItsRecord(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false) // one attempt before, claim a minute long
	before, was := xmin(t, pool, row.ID), rowJSON(t, pool, row.ID)

	started := startWith(t, pool, row, time.Minute)
	require.Len(t, started, 1)
	require.Equal(t, 2, started[0].Attempts, "the second attempt")
	require.Equal(t, before, xmin(t, pool, row.ID), "the start wrote a version of the row")
	require.Equal(t, was, rowJSON(t, pool, row.ID))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records
		WHERE id = $1 AND outbox_id = $2 AND attempt = 2 AND status = 'sending' AND counts_budget`, started[0].RecordID, row.ID))
}

// A row that waited in its actor's mailbox (a slow sink ahead of it) may
// reach its start with little of its claim left. The start extends it to
// the claim's whole time from now: the send (half a claim at most,
// mayWait) and its outcome's write end before any other instance may take
// the row, as when every start extended its claim.
func TestAStartExtendsAClaimTooShortForItsSend(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET claim_expires_at = now() + interval '10 seconds' WHERE id = $1`, row.ID)
	require.NoError(t, err)

	at := time.Now()
	started := startWith(t, pool, row, time.Minute)
	require.Len(t, started, 1)
	var expires time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT claim_expires_at FROM switchboard.outbox WHERE id = $1`, row.ID).Scan(&expires))
	require.False(t, expires.Before(at.Add(time.Minute)), "a claim of 10 s left was not extended: it expires %v after the start", expires.Sub(at))
}

// The start locks the rows it writes records for. Another instance that
// finds the row's holder dead and takes its rows over skips a row whose
// start is under way (FOR UPDATE SKIP LOCKED), rather than take it while a
// record, and a send, are being begun for it.
func TestAStartLocksItsRowsAgainstATakeover(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var started []store.StartedRow
	b := &pgx.Batch{}
	store.QueueStartAttempts(b, []store.Start{{Row: row, TAT: time.Now()}}, "instance-a", time.Now(), time.Minute, 7, &started, time.Time{})
	require.NoError(t, tx.SendBatch(ctx, b).Close())
	require.Len(t, started, 1)

	// Two hours on, instance-a's heartbeat (an hour) has lapsed and its
	// claim (a minute) expired: instance-b would take the row over.
	took, err := store.ClaimDue(ctx, pool, store.ClaimParams{
		Instance: "instance-b", Now: time.Now().Add(2 * time.Hour), TTL: time.Minute, Limit: 10, PerSink: 10,
	})
	require.NoError(t, err)
	require.Empty(t, took, "a takeover took a row whose start was under way")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE id = $1 AND claimed_by = 'instance-a' AND claim_token = 1001`, row.ID))
}

// An attempt is counted on its row when its outcome is written: the row's
// attempts become the attempt's number, and its first attempt's time the
// attempt's, both from the attempt's record.
func TestAnOutcomeCountsItsAttempt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET attempts = 0, first_attempt_at = NULL WHERE id = $1`, row.ID)
	require.NoError(t, err)

	for attempt, token := range []int64{1001, 1002} {
		r := store.Claimed{ID: row.ID, Token: token}
		if attempt > 0 {
			_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'claimed', claimed_by = 'instance-a', claim_token = $2,
				claim_expires_at = now() + interval '1 minute' WHERE id = $1`, row.ID, token)
			require.NoError(t, err)
		}
		started := startWith(t, pool, r, time.Minute)
		require.Len(t, started, 1)
		require.Equal(t, attempt+1, started[0].Attempts)
		now := time.Now()
		require.NoError(t, store.RecordFinished(ctx, pool, []store.Finished{{
			RecordID: started[0].RecordID, Rows: []store.Claimed{r}, Status: "failed", Class: "timeout",
			Outcome: store.RowOutcome{State: "pending", Class: "timeout", DueAt: now.Add(30 * time.Second)}, At: now,
		}}, "instance-a", hostReplaces))

		var attempts int
		var first, sent time.Time
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT o.attempts, o.first_attempt_at, (SELECT min(sent_at) FROM switchboard.delivery_records WHERE outbox_id = o.id)
			FROM switchboard.outbox o WHERE o.id = $1`, row.ID).Scan(&attempts, &first, &sent))
		require.Equal(t, attempt+1, attempts, "the outcome did not count its attempt")
		require.True(t, first.Equal(sent), "the first attempt's time is the first record's")
	}
}

// An attempt whose outcome was never written (its instance died mid-send)
// was counted nowhere but in its record. The claim that takes the row over
// closes the attempt as abandoned and counts it, before anything reads the
// row's attempts against the cap: a death mid-send on the seventh attempt
// leaves the row at its cap (finished undeliverable by its taker), never
// started an eighth time. A row taken pending is not read for records.
func TestAnAbandonedAttemptIsCountedBeforeTheNextStarts(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-dead", 1002, "", false)
	_, err := pool.Exec(ctx, `
		WITH r AS (UPDATE switchboard.outbox SET attempts = 6, claim_expires_at = now() - interval '1 second'
		           WHERE id = $1 RETURNING id)
		INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, attempt, counts_budget, status, sent_at)
		VALUES ($2, 'human:1', $1, 'todo.dead_lettered', 7, true, 'sending', now() - interval '3 minutes')`, row.ID, sink)
	require.NoError(t, err)
	pending := openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)

	took, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-a", Now: time.Now(), TTL: time.Minute, Limit: 10, PerSink: 10})
	require.NoError(t, err)
	require.Len(t, took, 2)
	byID := map[int64]store.OutboxRow{took[0].ID: took[0], took[1].ID: took[1]}
	over := byID[row.ID]
	require.Equal(t, 7, over.Attempts, "the abandoned attempt is not counted")
	require.True(t, over.Abandoned)
	require.EqualValues(t, 1002, over.TakenFrom)
	require.Equal(t, 7, count(t, pool, `SELECT attempts FROM switchboard.outbox WHERE id = $1`, row.ID))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records
		WHERE outbox_id = $1 AND status = 'failed' AND class = 'abandoned' AND counts_budget`, row.ID), "the abandoned attempt is not closed")
	require.Empty(t, startWith(t, pool, over.Claim(), time.Minute), "an eighth attempt started")
	require.False(t, byID[pending].Abandoned)
	require.Zero(t, byID[pending].Attempts)
}
