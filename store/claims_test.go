package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// claimedRow inserts a row claimed by instance with token, and returns it.
func claimedRow(t *testing.T, pool *pgxpool.Pool, sink int64, instance string, token int64, key string, windowed bool) store.Claimed {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, claimed_by, claim_expires_at,
		                    claim_token, dedup_key, windowed, attempts, first_attempt_at)
		VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{"title": "t"}', now(), 'claimed', $2,
		        now() + interval '1 minute', $3, nullif($4, ''), $5, 1, now())
		RETURNING id`, sink, instance, token, key, windowed).Scan(&id))
	return store.Claimed{ID: id, Token: token}
}

// heldRow inserts a row held for a token, due a minute ago, after a first
// attempt an hour ago, and returns its id.
func heldRow(t *testing.T, pool *pgxpool.Pool, sink int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, attempts, first_attempt_at)
		VALUES ($1, 'human:1', 'todo.dead_lettered', 'normal', '{"title": "t"}', now() - interval '1 minute', 'held', 1, now() - interval '1 hour')
		RETURNING id`, sink).Scan(&id))
	return id
}

// openRow inserts a pending row of key with count and event type.
func openRow(t *testing.T, pool *pgxpool.Pool, sink int64, key string, count int, eventType string, windowed bool) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, dedup_key, count, windowed)
		VALUES ($1, 'human:1', $4, CASE WHEN $4 = 'relay.exhausted' THEN 'high' ELSE 'normal' END,
		        jsonb_build_object('title', $4::text), now(), nullif($2, ''), $3, $5)
		RETURNING id`, sink, key, count, eventType, windowed).Scan(&id))
	return id
}

// A repeat of a key that arrives while its row is claimed opens a row of
// its own. A statement that makes the claimed row pending or held again
// takes that row in, as the fan-out would have had the row been open
// (windowed keys add their counts, a relay exhaustion replaces a dead
// letter), instead of failing on outbox_open_key: on 5499c8a every one of
// these statements failed with 23505.
func TestARowGoingBackTakesInTheRepeatOfItsKey(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	back := map[string]func(r store.Claimed) error{
		"retry": func(r store.Claimed) error {
			return store.FinishRows(ctx, pool, []store.Claimed{r}, "instance-a",
				store.RowOutcome{State: "pending", Class: "server", DueAt: time.Now().Add(time.Minute)}, time.Now(), hostReplaces)
		},
		"recorded retry": func(r store.Claimed) error {
			return store.RecordFinished(ctx, pool, []store.Finished{{Rows: []store.Claimed{r}, Status: "failed",
				Outcome: store.RowOutcome{State: "pending", Class: "server", DueAt: time.Now().Add(time.Minute)}, At: time.Now()}}, "instance-a", hostReplaces)
		},
		"hold": func(r store.Claimed) error {
			b := &pgx.Batch{}
			store.QueueHoldRows(b, []store.Hold{{Row: r, SinkID: sink, Until: time.Now().Add(time.Minute)}}, "instance-a", map[int64]int{}, hostReplaces)
			return pool.SendBatch(ctx, b).Close()
		},
		"release": func(r store.Claimed) error {
			n, err := store.ReleaseRows(ctx, pool, []store.Claimed{r}, "instance-a", hostReplaces)
			require.Equal(t, 1, n)
			return err
		},
		"give back unsent": func(r store.Claimed) error {
			started := startAttempt(t, pool, r)
			n, err := store.GiveBackUnsent(ctx, pool, []store.Unsent{{Row: r, RecordID: started.RecordID}}, "instance-a", hostReplaces)
			require.Equal(t, 1, n)
			return err
		},
	}
	for name, goBack := range back {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name                   string
				windowed               bool
				repeatType             string
				wantCount              int
				wantType, wantSeverity string
			}{
				{"windowed", true, "todo.dead_lettered", 4, "todo.dead_lettered", "normal"},
				{"same occurrence", false, "todo.dead_lettered", 1, "todo.dead_lettered", "normal"},
				{"relay exhaustion", false, "relay.exhausted", 1, "relay.exhausted", "high"},
			} {
				key := name + "/" + tc.name
				row := claimedRow(t, pool, sink, "instance-a", 1001, key, tc.windowed)
				repeat := openRow(t, pool, sink, key, 3, tc.repeatType, tc.windowed)

				require.NoError(t, goBack(row), tc.name)

				var ids []int64
				var count int
				var eventType, severity, title string
				require.NoError(t, pool.QueryRow(ctx, `
					SELECT array_agg(id), max(count), max(event_type), max(severity), max(payload->>'title')
					FROM switchboard.outbox WHERE dedup_key = $1`, key).Scan(&ids, &count, &eventType, &severity, &title))
				require.Equal(t, []int64{row.ID}, ids, "%s: the repeat's row %d is taken in", tc.name, repeat)
				require.Equal(t, tc.wantCount, count, tc.name)
				require.Equal(t, tc.wantType, eventType, tc.name)
				require.Equal(t, tc.wantSeverity, severity, tc.name)
				if tc.repeatType == "relay.exhausted" {
					require.Equal(t, "relay.exhausted", title, "the relay exhaustion's payload replaces the dead letter's")
				}
			}
		})
	}
}

// Every statement on a held row names the token of the claim it was
// handed: once the row is claimed again (its claim expired, and another
// instance, or this one, took it), a late outcome of the old claim
// changes nothing. On 5499c8a the same instance's old claim overwrote its
// new one.
func TestAnOldClaimsStatementsChangeNothing(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	old := store.Claimed{Token: 1001}
	statements := map[string]func(r store.Claimed) error{
		"finish": func(r store.Claimed) error {
			return store.FinishRows(ctx, pool, []store.Claimed{r}, "instance-a", store.RowOutcome{State: "delivered"}, now, hostReplaces)
		},
		"record": func(r store.Claimed) error {
			return store.RecordFinished(ctx, pool, []store.Finished{{Rows: []store.Claimed{r}, Status: "delivered",
				Outcome: store.RowOutcome{State: "delivered"}, At: now}}, "instance-a", hostReplaces)
		},
		"hold": func(r store.Claimed) error {
			b := &pgx.Batch{}
			store.QueueHoldRows(b, []store.Hold{{Row: r, SinkID: sink, Until: now}}, "instance-a", map[int64]int{}, hostReplaces)
			return pool.SendBatch(ctx, b).Close()
		},
		"start": func(r store.Claimed) error {
			var started []store.StartedRow
			b := &pgx.Batch{}
			store.QueueStartAttempts(b, []store.Start{{Row: r, TAT: now}}, "instance-a", now, time.Minute, 7, &started, time.Time{})
			if err := pool.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			require.Equal(t, r.Token != old.Token, len(started) == 1)
			return nil
		},
		"release": func(r store.Claimed) error {
			n, err := store.ReleaseRows(ctx, pool, []store.Claimed{r}, "instance-a", hostReplaces)
			require.Equal(t, r.Token != old.Token, n == 1)
			return err
		},
		"close abandoned": func(r store.Claimed) error {
			closed, err := store.CloseAbandoned(ctx, pool, []store.Claimed{r}, "instance-a", now)
			require.Equal(t, r.Token != old.Token, len(closed) == 1)
			return err
		},
		"give back unsent": func(r store.Claimed) error {
			var rec int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT attempt_record_id FROM switchboard.outbox WHERE id = $1`, r.ID).Scan(&rec))
			n, err := store.GiveBackUnsent(ctx, pool, []store.Unsent{{Row: r, RecordID: rec}}, "instance-a", hostReplaces)
			require.Equal(t, r.Token != old.Token, n == 1)
			return err
		},
	}
	for name, run := range statements {
		t.Run(name, func(t *testing.T) {
			row := claimedRow(t, pool, sink, "instance-a", 1002, "", false) // claimed again
			_, err := pool.Exec(ctx, `
				WITH rec AS (
				    INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, status, sent_at)
				    VALUES ($2, 'human:1', $1, 'todo.dead_lettered', 'sending', now()) RETURNING id
				)
				UPDATE switchboard.outbox SET attempt_record_id = (SELECT id FROM rec) WHERE id = $1`, row.ID, sink)
			require.NoError(t, err)
			before := rowJSON(t, pool, row.ID)
			old.ID = row.ID
			require.NoError(t, run(old))
			require.Equal(t, before, rowJSON(t, pool, row.ID), "the old claim changed the row")
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records WHERE outbox_id = $1 AND status = 'sending'`, row.ID),
				"the new claim's attempt is not closed as abandoned")
			require.NoError(t, run(row), "the new claim's statement runs")
		})
	}
}

// startAttempt starts an attempt on r as a group reservation does, and
// returns it.
func startAttempt(t *testing.T, pool *pgxpool.Pool, r store.Claimed) store.StartedRow {
	t.Helper()
	return startAttemptAs(t, pool, r, "instance-a", time.Now())
}

// startAttemptAs begins the attempt of r, claimed by instance, at now.
func startAttemptAs(t *testing.T, pool *pgxpool.Pool, r store.Claimed, instance string, now time.Time) store.StartedRow {
	t.Helper()
	var started []store.StartedRow
	b := &pgx.Batch{}
	store.QueueStartAttempts(b, []store.Start{{Row: r, TAT: now.Add(time.Minute)}}, instance, now, time.Minute, 7, &started, time.Time{})
	require.NoError(t, pool.SendBatch(context.Background(), b).Close())
	require.Len(t, started, 1, "the attempt starts")
	return started[0]
}

// An attempt an actor started and never sent (it reserved the row with
// the rows queued before it, and stopped before its turn) is given back
// as if it had never started: the row pending and unclaimed, its attempt
// uncounted, its "sending" record gone and with it the token it took
// from the sink's budget. An attempt of the row that is not the one named
// (the row was given back and started again since) is left alone.
func TestAnUnsentAttemptGivenBackIsAsIfItNeverStarted(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET attempts = 0, first_attempt_at = NULL WHERE id = $1`, row.ID)
	require.NoError(t, err)
	before := rowJSON(t, pool, row.ID)
	tatBefore, err := store.BudgetTAT(ctx, pool, sink)
	require.NoError(t, err)

	first := startAttempt(t, pool, row)
	require.Equal(t, 1, first.Attempts)
	n, err := store.GiveBackUnsent(ctx, pool, []store.Unsent{{Row: row, RecordID: first.RecordID}}, "instance-a", hostReplaces)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	var state string
	var attempts int
	var claimed, firstAt, rec bool
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT state, attempts, claimed_by IS NOT NULL OR claim_token IS NOT NULL OR claim_expires_at IS NOT NULL,
		       first_attempt_at IS NOT NULL, attempt_record_id IS NOT NULL
		FROM switchboard.outbox WHERE id = $1`, row.ID).Scan(&state, &attempts, &claimed, &firstAt, &rec))
	require.Equal(t, "pending", state)
	require.Zero(t, attempts, "the attempt is not counted")
	require.False(t, claimed, "the row is unclaimed")
	require.False(t, firstAt, "a row never attempted has no first attempt")
	require.False(t, rec)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records WHERE outbox_id = $1`, row.ID), "the sending record is gone")
	tatAfter, err := store.BudgetTAT(ctx, pool, sink)
	require.NoError(t, err)
	require.Equal(t, tatBefore, tatAfter, "the token is back in the budget")
	require.NotEqual(t, before, rowJSON(t, pool, row.ID), "released, not left as it was claimed")

	// Claimed again and started again: the first attempt's name no
	// longer gives anything back.
	_, err = pool.Exec(ctx, `UPDATE switchboard.outbox SET state = 'claimed', claimed_by = 'instance-a', claim_token = 1002,
		claim_expires_at = now() + interval '1 minute' WHERE id = $1`, row.ID)
	require.NoError(t, err)
	again := store.Claimed{ID: row.ID, Token: 1002}
	second := startAttempt(t, pool, again)
	n, err = store.GiveBackUnsent(ctx, pool, []store.Unsent{{Row: again, RecordID: first.RecordID}}, "instance-a", hostReplaces)
	require.NoError(t, err)
	require.Zero(t, n, "an attempt other than the one named is left alone")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records WHERE id = $1 AND status = 'sending'`, second.RecordID))
	require.Equal(t, 1, count(t, pool, `SELECT attempt FROM switchboard.delivery_records WHERE id = $1`, second.RecordID),
		"the attempt given back was never counted: the next is the first again")
	require.Zero(t, count(t, pool, `SELECT attempts FROM switchboard.outbox WHERE id = $1`, row.ID),
		"an attempt in flight is counted by its outcome")
}

// The start of an attempt checks the cap in the statement, on the row as
// it is, not on the copy read at claim.
func TestAnAttemptPastTheCapDoesNotStart(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	row := claimedRow(t, pool, sink, "instance-a", 1001, "", false)
	_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET attempts = 7 WHERE id = $1`, row.ID)
	require.NoError(t, err)
	var started []store.StartedRow
	b := &pgx.Batch{}
	store.QueueStartAttempts(b, []store.Start{{Row: row, TAT: time.Now()}}, "instance-a", time.Now(), time.Minute, 7, &started, time.Time{})
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	require.Empty(t, started)
	_, _, err = store.StartAttempt(ctx, pool, row, "instance-a", time.Now(), time.Minute, 7)
	require.ErrorIs(t, err, store.ErrClaimLost)
	require.Equal(t, 7, count(t, pool, `SELECT attempts FROM switchboard.outbox WHERE id = $1`, row.ID))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.delivery_records`))
}

// One instance at a time delivers to a sink, best effort, and this is the
// bound: two claims running at the same moment do not see each other's
// rows, and a claim takes a sink's rows only up to the first it could not
// lock. So a claim that meets the sink's first rows locked by another
// leaves the sink to it, and every claim after them, of these instances
// or another, leaves the sink alone while those rows are claimed.
func TestOneInstancePerSinkIsBestEffortWithinOneClaim(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	for range 8 {
		openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)
	}
	now := time.Now().Add(time.Second)
	params := func(instance string) store.ClaimParams {
		return store.ClaimParams{Instance: instance, Now: now, TTL: time.Minute, Limit: 10, PerSink: 2}
	}
	claimedBy := func(instance string) int {
		return count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE state = 'claimed' AND claimed_by = $1`, instance)
	}
	// Instance a's claim (room for one row) has taken the sink's first row
	// and not committed when b's runs: b neither waits nor sees it, and
	// takes none of the sink's rows, since its first is locked.
	pa := params("instance-a")
	pa.Limit = 1
	a, rowsA := claimInFlight(t, pool, pa)
	require.Len(t, rowsA, 1)
	rowsB, err := store.ClaimDue(ctx, pool, params("instance-b"))
	require.NoError(t, err)
	require.Empty(t, rowsB, "b took rows of the sink past the one a had locked")
	require.NoError(t, a.Commit(ctx))
	require.Equal(t, 1, claimedBy("instance-a"))

	// Every later claim leaves the sink to a while it holds its row.
	for _, instance := range []string{"instance-c", "instance-b"} {
		rows, err := store.ClaimDue(ctx, pool, params(instance))
		require.NoError(t, err)
		require.Empty(t, rows, "%s leaves the sink while instance a holds it", instance)
	}
	require.Zero(t, claimedBy("instance-b"))
	require.Zero(t, claimedBy("instance-c"))
}

// A claim takes a sink's rows only up to the first it could not lock: a
// claim that meets a row another claim has locked leaves the sink's later
// rows, for that claim may yet roll back (its instance crashed, or its
// statement timed out), and the later rows would then go out while the
// earlier one waited. The sinks whose rows it could lock it takes as
// before, and once the lock has gone the next claim takes the sink's rows
// from its first, in due order. (The delivery state machine met this
// after a crash: properties/, "sent while rows ... waited pending".)
func TestAClaimTakesASinksRowsOnlyUpToOneItCouldNotLock(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	f := storetest.NewFactory(t, pool)
	other := f.Sink(storetest.SinkOpts{Owner: notifytype.Human("1")})
	var first []int64
	for range 3 {
		first = append(first, openRow(t, pool, sink, "", 1, "todo.dead_lettered", false))
	}
	otherRow := openRow(t, pool, other, "", 1, "todo.dead_lettered", false)
	now := time.Now().Add(time.Second)
	params := func(instance string) store.ClaimParams {
		return store.ClaimParams{Instance: instance, Now: now, TTL: time.Minute, Limit: 10, PerSink: 5}
	}

	// A claim of instance a locks the sink's first row, and rolls back.
	pa := params("instance-a")
	pa.Limit = 1
	a, rowsA := claimInFlight(t, pool, pa)
	require.Equal(t, []int64{first[0]}, ids(rowsA))

	rowsB, err := store.ClaimDue(ctx, pool, params("instance-b"))
	require.NoError(t, err)
	require.Equal(t, []int64{otherRow}, ids(rowsB), "b takes the other sink's row, and none of the sink whose first row was locked")
	require.NoError(t, a.Rollback(ctx))

	rowsB, err = store.ClaimDue(ctx, pool, params("instance-b"))
	require.NoError(t, err)
	require.Equal(t, first, ids(rowsB), "once the lock has gone, the sink's rows from its first, in due order")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE state = 'pending'`))
}

// claimInFlight runs p's claim in a transaction it leaves open: a claim
// in flight, its rows locked and not committed. The test commits or rolls
// it back; its cleanup rolls back one left open.
func claimInFlight(t *testing.T, pool *pgxpool.Pool, p store.ClaimParams) (pgx.Tx, []store.OutboxRow) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	rows, err := store.ClaimDue(ctx, tx, p)
	require.NoError(t, err)
	return tx, rows
}

// ids returns the rows' ids, in their order.
func ids(rows []store.OutboxRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// An instance that stopped beating (it died) holds its rows no longer: a
// claim takes them at once, not once their claims expire; the rows of an
// instance that beats stay its own until then.
func TestADeadInstancesRowsAreClaimedAtOnce(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, "instance-dead", now.Add(-time.Minute), 20*time.Second, 0))
	require.NoError(t, store.Beat(ctx, pool, "instance-alive", now, 20*time.Second, 0))
	// The live instance's row is of another sink: a row of a sink a live
	// instance holds is left to it (TestARowTakenOverIsLeftToTheInstanceHoldingItsSink).
	other := storetest.NewFactory(t, pool).Sink(storetest.SinkOpts{Owner: notifytype.Human("1")})
	dead := claimedRow(t, pool, sink, "instance-dead", 1001, "", false)
	alive := claimedRow(t, pool, other, "instance-alive", 1002, "", false)

	rows, err := store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-b", Now: now, TTL: time.Minute, Limit: 10, PerSink: 5})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, dead.ID, rows[0].ID, "the dead instance's row is taken; its claim had not expired")
	require.NotEqual(t, dead.Token, rows[0].ClaimToken, "with a new token")

	// A minute on, both claims have expired; instance b still has the row
	// it took queued, and leaves it alone.
	rows, err = store.ClaimDue(ctx, pool, store.ClaimParams{Instance: "instance-b", Now: now.Add(time.Minute + time.Second),
		TTL: time.Minute, Limit: 10, PerSink: 5, Handed: []int64{dead.ID}})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the live instance's row once its claim expired")
	require.Equal(t, alive.ID, rows[0].ID)

	require.NoError(t, store.Unbeat(ctx, pool, "instance-alive"))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.outbox_instances WHERE name = 'instance-alive'`))
}

// A row this instance still has a copy of (queued, or being sent: Handed)
// is not taken over by it, whoever holds the row now. Here instance-a's
// copy is in flight while instance-c, which took the row over, has let its
// own claim expire too. Taken by instance-a, the row had to be given its
// copy's token back (RestoreClaim), and a copy that ended meanwhile left
// it claimed with no copy until the claim expired (the delivery state
// machine: a settle that waited for ever). Another instance takes it; so
// does instance-a once its copy is done.
func TestAClaimLeavesARowHandedHereWhoeverHoldsIt(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, "instance-c", now, time.Hour, time.Minute))
	row := claimedRow(t, pool, sink, "instance-c", 1001, "", false)
	later := now.Add(time.Minute + time.Second) // past the claim
	claim := func(instance string, handed []int64) []store.OutboxRow {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }() // each claim looks at the same row
		rows, err := store.ClaimDue(ctx, tx, store.ClaimParams{Instance: instance, Now: later, TTL: time.Minute,
			Limit: 10, PerSink: 5, Handed: handed})
		require.NoError(t, err)
		return rows
	}

	require.Empty(t, claim("instance-a", []int64{row.ID}), "instance-a takes over a row it has a copy of")
	require.Equal(t, []int64{row.ID}, ids(claim("instance-b", nil)), "another instance takes the expired claim over")
	require.Equal(t, []int64{row.ID}, ids(claim("instance-a", nil)), "instance-a takes it once its copy is done")
}

// A row whose claim a claim may take over (its instance died, or its
// claim expired) is left to the live instance that holds other rows of its
// sink, as a due row of that sink is: that instance takes it over in its
// turn, behind the rows it holds. Taken by another, it went out beside
// them, and ahead of the sink's earlier rows when the holder then gave
// those back (the delivery state machine: a row taken over from a dead
// instance sent while an earlier row, given back, waited pending). Once
// the holder's rows are finished, any instance takes it.
func TestARowTakenOverIsLeftToTheInstanceHoldingItsSink(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, "instance-dead", now.Add(-time.Minute), 20*time.Second, 0))
	require.NoError(t, store.Beat(ctx, pool, "instance-alive", now, 20*time.Second, 0))
	dead := claimedRow(t, pool, sink, "instance-dead", 1001, "", false)
	held := claimedRow(t, pool, sink, "instance-alive", 1002, "", false)
	params := func(instance string) store.ClaimParams {
		return store.ClaimParams{Instance: instance, Now: now, TTL: time.Minute, Limit: 10, PerSink: 5}
	}

	rows, err := store.ClaimDue(ctx, pool, params("instance-b"))
	require.NoError(t, err)
	require.Empty(t, rows, "the dead instance's row of a sink instance-alive holds is instance-alive's to take")

	rows, err = store.ClaimDue(ctx, pool, params("instance-alive"))
	require.NoError(t, err)
	require.Equal(t, []int64{dead.ID}, ids(rows), "the instance holding the sink takes it over")

	// Given back (as an instance that stopped would), both rows are any
	// instance's again.
	_, err = store.ReleaseRows(ctx, pool, []store.Claimed{held, rows[0].Claim()}, "instance-alive", store.Replacements{})
	require.NoError(t, err)
	later := params("instance-b")
	later.Now = time.Now().Add(time.Second)
	rows, err = store.ClaimDue(ctx, pool, later)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{dead.ID, held.ID}, ids(rows))
}

// A claim that does not search for rows to take over (SkipExpired) leaves
// a sink whose earlier row a dead instance holds: the sink's later rows
// wait for the claim that takes that row over, and go after it. Taken at
// once, they went out ahead of it, and ahead of it for good when the
// instance, judged dead while it still lived, gave the row back (the
// delivery state machine). Other sinks are claimed as ever.
func TestAClaimThatTakesNothingOverLeavesTheSinksOfRowsItCouldTakeOver(t *testing.T) {
	t.Parallel()
	pool, sink := newHeldRowsDB(t)
	ctx := context.Background()
	other := storetest.NewFactory(t, pool).Sink(storetest.SinkOpts{Owner: notifytype.Human("1")})
	now := time.Now()
	require.NoError(t, store.Beat(ctx, pool, "instance-dead", now.Add(-time.Minute), 20*time.Second, 0))
	dead := claimedRow(t, pool, sink, "instance-dead", 1001, "", false)
	later := openRow(t, pool, sink, "", 1, "todo.dead_lettered", false)
	otherRow := openRow(t, pool, other, "", 1, "todo.dead_lettered", false)
	p := store.ClaimParams{Instance: "instance-b", Now: time.Now().Add(time.Second), TTL: time.Minute, Limit: 10, PerSink: 5,
		SkipExpired: true}

	rows, err := store.ClaimDue(ctx, pool, p)
	require.NoError(t, err)
	require.Equal(t, []int64{otherRow}, ids(rows), "the sink whose earlier row the dead instance holds is left")

	p.SkipExpired = false
	rows, err = store.ClaimDue(ctx, pool, p)
	require.NoError(t, err)
	require.Equal(t, []int64{dead.ID, later}, ids(rows), "the search takes the row over, and the sink's later row after it")
}

func rowJSON(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT to_jsonb(o)::text FROM switchboard.outbox o WHERE id = $1`, id).Scan(&s))
	return s
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// Two claimed rows of one key (a repeat opened a row while the first was
// claimed, and one claim took both) cannot both go back to pending in one
// statement (outbox_open_key refuses it, and the statement changes
// nothing). Given back together, by a stop or as attempts started and not
// sent, they go back as one row: the later takes the earlier in, counts
// added, and nothing stays claimed.
func TestTwoRowsOfOneKeyGoBackAsOne(t *testing.T) {
	t.Parallel()
	back := map[string]func(pool *pgxpool.Pool, rows []store.Claimed) (int, error){
		"release": func(pool *pgxpool.Pool, rows []store.Claimed) (int, error) {
			return store.ReleaseRows(context.Background(), pool, rows, "instance-a", hostReplaces)
		},
		"give back unsent": func(pool *pgxpool.Pool, rows []store.Claimed) (int, error) {
			unsent := make([]store.Unsent, len(rows))
			for i, r := range rows {
				unsent[i] = store.Unsent{Row: r, RecordID: startAttempt(t, pool, r).RecordID}
			}
			return store.GiveBackUnsent(context.Background(), pool, unsent, "instance-a", hostReplaces)
		},
	}
	for name, goBack := range back {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, sink := newHeldRowsDB(t)
			first := claimedRow(t, pool, sink, "instance-a", 2001, "k", true)
			second := claimedRow(t, pool, sink, "instance-a", 2001, "k", true)
			n, err := goBack(pool, []store.Claimed{first, second})
			require.NoError(t, err)
			require.Equal(t, 2, n, "both went back")
			require.Zero(t, count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE state = 'claimed'`), "none stays claimed")
			require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM switchboard.outbox WHERE state = 'pending' AND dedup_key = 'k'`), "one open row of the key")
			require.Equal(t, 2, count(t, pool, `SELECT sum(count) FROM switchboard.outbox WHERE dedup_key = 'k'`), "standing for both events")
		})
	}
}
