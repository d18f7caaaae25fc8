package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Two rows of one key can both be claimed: the row, and the row of a repeat
// that arrived while it was claimed. When the recorder makes one pending
// (its attempt failed) while a reservation holds the other (its sink's
// budget is spent), neither statement's snapshot sees the other's row, so
// neither takes it in, and the later one fails on outbox_open_key. A
// reservation that gave its group up there left every row of the group
// claimed until its claim expired (found by the state machine,
// properties/statemachine_test.go). It tries again, and the hold then takes
// the pending row in.
func TestAHoldThatMeetsARepeatsRowTriesAgain(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	_, p, scope := w.Human()
	eng := w.Engine() // not serving: this test plays the claimer, the actor and the recorder
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: "http://127.0.0.1:9", Secret: "gtfya.race",
		PerHour: 1, Burst: 1, Events: []notifytype.EventType{host.EventRuleNotify}})
	claim := func() []store.OutboxRow {
		rows, err := store.ClaimDue(w.Ctx, w.Pool, store.ClaimParams{
			Instance: eng.InstanceForTest(), Now: w.Clock.Now(), TTL: 2 * time.Minute, Limit: 10, PerSink: 10,
		})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		return rows
	}

	// Spend the sink's one token.
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#1"))
	began, _, err := eng.ReserveForTest(w.Ctx, claim()[0])
	require.NoError(t, err)
	require.True(t, began)

	// The row of the key, claimed; a repeat's row, claimed too.
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))
	x := claim()[0]
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))
	y := claim()[0]
	key := func(id int64) (k string) {
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT dedup_key FROM switchboard.outbox WHERE id = $1`, id).Scan(&k))
		return k
	}
	require.Equal(t, key(x.ID), key(y.ID))

	// The recorder makes the repeat's row pending, and has not committed.
	tx, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(w.Ctx, `UPDATE switchboard.outbox SET state = 'pending', claimed_by = NULL, claim_token = NULL,
		claim_expires_at = NULL, attempts = attempts + 1 WHERE id = $1`, y.ID)
	require.NoError(t, err)

	type result struct {
		began, held bool
		err         error
	}
	done := make(chan result, 1)
	go func() {
		b, h, err := eng.ReserveForTest(w.Ctx, x)
		done <- result{b, h, err}
	}()
	// The hold waits on the pending row's index entry; then the recorder
	// commits.
	require.Eventually(t, func() bool {
		return w.F.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`) > 0
	}, enginetest.WaitTimeout, 5*time.Millisecond, "the hold waits for the recorder's row")
	require.NoError(t, tx.Commit(w.Ctx))

	r := <-done
	require.NoError(t, r.err, "the reservation tries its group again")
	require.True(t, r.held, "the row is held for the sink's next token")
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE state = 'claimed'`),
		"only the row whose attempt began is still claimed: %s", w.TableJSON("outbox", "payload"))
	var open, events int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*), coalesce(sum(count), 0) FROM switchboard.outbox
		WHERE dedup_key = $1 AND state IN ('pending', 'held')`, key(x.ID)).Scan(&open, &events))
	require.Equal(t, 1, open, "the held row took the pending one in")
	require.Equal(t, 2, events, "both events of the key wait in it")
}

// A group holds at most one row of a key per sink: two rows of one key
// (the row, and a repeat's row opened while it was claimed) held in one
// statement would both be open (outbox_open_key), and the statement failed
// for the whole group, leaving every row of it claimed until its claim
// expired (found by the state machine once an actor's step reserved all
// its queued rows together). The second is asked again in the next group,
// whose hold takes the first in; a row of another key is held beside it.
func TestAGroupHoldsOneRowOfAKeyAndTheNextTakesItIn(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	_, p, scope := w.Human()
	eng := w.Engine() // not serving: this test plays the claimer and the actor
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: "http://127.0.0.1:9", Secret: "gtfya.hold",
		PerHour: 1, Burst: 1, Events: []notifytype.EventType{host.EventRuleNotify}})
	claim := func(n int) []store.OutboxRow {
		rows, err := store.ClaimDue(w.Ctx, w.Pool, store.ClaimParams{
			Instance: eng.InstanceForTest(), Now: w.Clock.Now(), TTL: 2 * time.Minute, Limit: 10, PerSink: 10,
		})
		require.NoError(t, err)
		require.Len(t, rows, n)
		return rows
	}

	// Spend the sink's one token (its row stays claimed, being sent).
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#1"))
	sending := claim(1)[0]
	began, _, err := eng.ReserveForTest(w.Ctx, sending)
	require.NoError(t, err)
	require.True(t, began)

	// A row of key K, claimed; a repeat's row of K, and a row of another
	// key, claimed by the next claim.
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))
	first := claim(1)[0]
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#3"))
	rest := claim(2)
	require.NotNil(t, first.DedupKey)
	require.Equal(t, *first.DedupKey, *rest[0].DedupKey, "the repeat's row has the key")
	require.NotEqual(t, *first.DedupKey, *rest[1].DedupKey)

	got, err := eng.ReserveGroupForTest(w.Ctx, []store.OutboxRow{first, rest[0], rest[1]})
	require.NoError(t, err)
	require.Equal(t, []string{"held", "busy", "held"}, got)
	got, err = eng.ReserveGroupForTest(w.Ctx, []store.OutboxRow{rest[0]})
	require.NoError(t, err)
	require.Equal(t, []string{"held"}, got, "the next group holds it")

	require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1 AND state = 'claimed' AND id <> $2`, sink, sending.ID),
		"none stays claimed")
	require.Equal(t, 2, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1 AND state = 'held'`, sink), "one held row a key")
	require.Equal(t, 2, w.F.Count(`SELECT count FROM switchboard.outbox WHERE id = $1`, rest[0].ID), "the second took the first in")
}
