package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/sinks"
)

// A coalesced message's reservation reads the sink's budget after it has
// locked the sink's row: another instance's reservation that held the row
// meanwhile, and spent the token that was returning, is seen, and the
// held rows wait for the next token instead of spending it a second time.
// Read before the lock (or without it), the budget misses that send.
func TestACoalescedMessageReadsTheBudgetAfterItsLock(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.flush-lock", PerHour: 1, Burst: 1})
	logErrorsOnFailure(t, w)
	w.Emit(eng, todoDead(scope, 1, sinks.Content{}))
	w.Emit(eng, todoDead(scope, 2, sinks.Content{}))
	w.WaitN(2) // one sent, one held until the token returns in an hour
	require.Equal(t, map[string]int{"delivered": 1, "held": 1}, w.RowStates())
	var heldDue time.Time
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT due_at FROM switchboard.outbox WHERE state = 'held'`).Scan(&heldDue))

	// Another instance's reservation: it locks the sink's row and spends
	// the token that returns at heldDue on a send of its own.
	other, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Rollback(w.Ctx) })
	_, err = other.Exec(w.Ctx, `SELECT 1 FROM switchboard.sinks WHERE id = $1 FOR NO KEY UPDATE`, sink)
	require.NoError(t, err)
	_, err = other.Exec(w.Ctx, `
		INSERT INTO switchboard.delivery_records (sink_id, owner, event_type, attempt, counts_budget, status, sent_at, budget_tat)
		SELECT id, owner, 'todo.dead_lettered', 1, true, 'sending', $2, $2::timestamptz + interval '1 hour'
		FROM switchboard.sinks WHERE id = $1`, sink, heldDue)
	require.NoError(t, err)

	// The held row falls due: the coalesced message's reservation waits
	// for the sink's row (or, without the lock, goes ahead at once).
	w.Clock.Advance(heldDue.Sub(w.Clock.Now()))
	waitFor(t, w, "the coalesced reservation waits for the sink's lock, or sends", `
		SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock') > 0
		    OR (SELECT count(*) FROM switchboard.outbox WHERE state = 'held') = 0`)
	require.NoError(t, other.Commit(w.Ctx))

	// It reads the budget after the lock: no token; the row waits, held,
	// for the next one.
	waitFor(t, w, "the held row is rescheduled, or sent", `
		SELECT NOT EXISTS (SELECT 1 FROM switchboard.outbox WHERE state = 'held' AND due_at <= $1)`, heldDue)
	require.Equal(t, map[string]int{"delivered": 1, "held": 1}, w.RowStates(), "the token spent elsewhere is not spent again")
	require.Len(t, g.received(), 1)
}

// waitFor waits until the query's one boolean is true, or fails saying
// what it waited for, once enginetest.WaitTimeout has passed.
func waitFor(t *testing.T, w *hosttest.World, what, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(enginetest.WaitTimeout)
	for {
		var ok bool
		require.NoError(t, w.Pool.QueryRow(w.Ctx, query, args...).Scan(&ok))
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for: %s", enginetest.WaitTimeout, what)
		}
		w.NextAttempt(5 * time.Millisecond)
	}
}
