package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
)

// A claim pass fans out at most engine.FanOutInlineForTest events in its
// own round trip and claims their rows; it leaves the rest of a backlog
// of events to the fan-out service, which fans them out beside the
// claims. A pass that fanned out the whole backlog first kept every
// actor waiting for it: a drain of 2,000 events over 10 sinks sent its
// first message after 200 ms and had a quarter of its 20,000 messages
// out after 1.3 s, where the same backlog already fanned out took 0.6 s
// (docs/BENCHMARKS.md, session 19).
func TestAClaimPassLeavesABacklogOfEventsToTheFanOutService(t *testing.T) {
	t.Parallel()
	w, eng, scope := engineWithRuleSink(t) // not serving: the pass below is the only fan-out
	const events = engine.FanOutInlineForTest + 50
	emitRuleEvents(t, w, eng, scope, "forge", events)

	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.NotEmpty(t, pass.Rows, "the pass claims rows of the events it fanned out")
	var left, rows int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT (SELECT count(*) FROM switchboard.outbox_events),
		(SELECT count(*) FROM switchboard.outbox)`).Scan(&left, &rows))
	require.Equal(t, events-engine.FanOutInlineForTest, left, "the pass leaves the rest of the backlog to the fan-out service")
	require.Equal(t, engine.FanOutInlineForTest, rows)
}

// The fan-out service fans out what a claim pass left, and wakes the
// claimer once its batch has committed: nothing else would wake it for
// those rows (the emits notified it once, before the pass). The pass
// itself wakes the service.
func TestTheFanOutServiceFansOutWhatAPassLeftAndWakesTheClaimer(t *testing.T) {
	t.Parallel()
	w, eng, scope := engineWithRuleSink(t) // not serving: the test runs the pass and the service
	const events = engine.FanOutInlineForTest + 50
	emitRuleEvents(t, w, eng, scope, "forge", events)
	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.False(t, eng.ClaimerWokenForTest(), "nothing has woken the claimer yet")

	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan error, 1)
	go func() { done <- eng.ServeFanOutForTest(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	waitFor(t, w, "the fan-out service fans out the rest of the backlog", `
		SELECT NOT EXISTS (SELECT 1 FROM switchboard.outbox_events)`)
	require.Equal(t, map[string]int{"claimed": len(pass.Rows), "pending": events - len(pass.Rows)}, w.RowStates())
	deadline := time.Now().Add(enginetest.WaitTimeout)
	for !eng.ClaimerWokenForTest() {
		require.True(t, time.Now().Before(deadline), "the fan-out service did not wake the claimer within %v of its commit", enginetest.WaitTimeout)
		time.Sleep(time.Millisecond)
	}
}

// A pass woken because rows fell due, an actor took a row or the fan-out
// service committed rows claims without fanning out: only a notification,
// the poll or the sweep after notifications tells the claimer that events
// may be waiting. In a drain, passes of the first kind are most of them,
// and each fan-out statement that found nothing cost about a millisecond
// to plan and run (docs/BENCHMARKS.md, session 19).
func TestAPassAfterRowsDoesNotFanOut(t *testing.T) {
	t.Parallel()
	w, eng, scope := engineWithRuleSink(t) // not serving: the test runs the passes
	emitRuleEvents(t, w, eng, scope, "first", 1)
	pass, err := testhooks.ClaimOnce(w.Ctx, eng) // as on a notification
	require.NoError(t, err)
	require.Len(t, pass.Rows, 1)

	emitRuleEvents(t, w, eng, scope, "second", 1)
	rows, err := eng.ClaimPassAfterRowsForTest(w.Ctx)
	require.NoError(t, err)
	require.Empty(t, rows)
	var left int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT count(*) FROM switchboard.outbox_events`).Scan(&left))
	require.Equal(t, 1, left, "the pass did not fan out")

	pass, err = testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Len(t, pass.Rows, 1, "a pass on a notification fans it out and claims its row")
}

// An event whose emit sent no notification (debounced: within
// NotifyDebounce of the one before) is fanned out by the claimer's poll.
// Here the window is an hour, so only the poll can find the second event
// (emitted once the engine listens, as in the sweep's test below).
func TestAnEventEmittedWithoutANotificationIsFannedOutAtThePoll(t *testing.T) {
	t.Parallel()
	deliverTwoEvents(t, func(c *engine.Config) { c.NotifyDebounce = time.Hour })
}

// An event whose emit sent no notification is fanned out by the sweep a
// notification schedules one window later, well before the poll: here the
// poll is an hour away and the window two seconds long. The second event
// is emitted only when a sweep is all that could find it: any pass with
// events after it committed (the listener's first, or one a late
// notification of the first event asks for) would find it as well, and
// mutant sweep-looks-for-events survived so, under load, while this test
// only waited for the engine to listen.
func TestAnEventEmittedWithoutANotificationIsFannedOutByTheSweep(t *testing.T) {
	t.Parallel()
	w, eng, scope := listeningRuleSink(t, func(c *engine.Config) {
		c.NotifyDebounce = 2 * time.Second
		c.PollInterval = time.Hour
	})
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		return eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, "forge#1"))
	}))
	require.Equal(t, "delivered", w.Wait().State, "forge#1")
	// The second event commits once nothing but a sweep can find it: the
	// first event's notification was passed on and its pass is over, so no
	// stray pass with events (a late notification, the listener's first
	// pass) finds it instead. It sends no notification of its own.
	require.Eventually(t, eng.OnlyASweepLooksForTest, enginetest.WaitTimeout, time.Millisecond,
		"the claimer never waited for a sweep alone after the first event's notification")
	eng.NotifiedNowForTest()
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		return eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, "forge#2"))
	}))
	require.Equal(t, "delivered", w.Wait().State, "forge#2, found by a sweep")
}

// An emit that skipped its notification inside the window may commit after
// the sweep the window's notification scheduled has looked: its
// transaction is its caller's, and a busy machine or a caller with more
// to do commits it late. The claimer looks once more, four windows on,
// before leaving it to the poll (an hour here). A CI run with a CPU-bound
// loop beside it once lost the second event of
// TestAnEventEmittedWithoutANotificationIsFannedOutByTheSweep this way.
func TestAnEventWhoseEmitCommitsAfterTheSweepIsFannedOutByTheLateSweep(t *testing.T) {
	t.Parallel()
	w, eng, scope := listeningRuleSink(t, func(c *engine.Config) {
		c.NotifyDebounce = time.Second
		c.PollInterval = time.Hour
	})

	first, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer first.Rollback(context.WithoutCancel(w.Ctx)) //nolint:errcheck // committed below
	require.NoError(t, eng.Emit(w.Ctx, first, ruleNotify(scope, 1, "forge#1")))
	late, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer late.Rollback(context.WithoutCancel(w.Ctx)) //nolint:errcheck // committed below
	// The second emit is inside the window: it sends no NOTIFY.
	eng.NotifiedNowForTest()
	require.NoError(t, eng.Emit(w.Ctx, late, ruleNotify(scope, 1, "forge#2")))

	require.NoError(t, first.Commit(w.Ctx))
	require.Equal(t, "delivered", w.Wait().State, "forge#1")
	require.Eventually(t, func() bool { return !eng.FirstSweepPendingForTest() }, enginetest.WaitTimeout, time.Millisecond,
		"the sweep after the first event's notification never fired")
	require.NoError(t, late.Commit(w.Ctx))
	require.Equal(t, "delivered", w.Wait().State, "forge#2, committed after the sweep")
}

// An emit's notification tells the claimer that events wait: with no poll
// and no sweep to find them, each event is fanned out and delivered on
// its notification alone. The first event may be found by the pass the
// listener asks for once it listens; the second, emitted after the first
// was delivered, only by its notification.
func TestAnEventIsFannedOutOnItsNotification(t *testing.T) {
	t.Parallel()
	deliverTwoEvents(t, func(c *engine.Config) {
		c.NotifyDebounce = -1 // every emit notifies; no sweep
		c.PollInterval = time.Hour
	})
}

// deliverTwoEvents serves an engine configured by configure and, once it
// listens (so that only a notification, the sweep or the poll can find an
// event, not the pass a listener asks for when it begins), emits two
// events, the second once the first was delivered (so that, with a
// debounce window, the second sends no notification): both must be
// delivered.
func deliverTwoEvents(t *testing.T, configure func(*engine.Config)) {
	t.Helper()
	w, eng, scope := listeningRuleSink(t, configure)
	for _, subject := range []string{"forge#1", "forge#2"} {
		require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
			return eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, subject))
		}))
		require.Equal(t, "delivered", w.Wait().State, subject)
	}
}

// listeningRuleSink is a world whose owner scope has one sink subscribed to
// rule.notify, its endpoint answering 200, and an engine configured by
// configure serving it, returned once the engine listens.
func listeningRuleSink(t *testing.T, configure func(*engine.Config)) (*hosttest.World, *engine.Engine, notifytype.OwnerScope) {
	t.Helper()
	w := hosttest.NewWorld(t)
	setup := w.Engine()
	g := newGate(http.StatusOK)
	g.release()
	base := newServer(t, g.ServeHTTP)
	_, p, scope := w.Human()
	w.Sink(setup, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.two",
		Events: []notifytype.EventType{host.EventRuleNotify}})
	eng := w.Serve(configure)
	waitFor(t, w, "the engine listens", `
		SELECT EXISTS (SELECT 1 FROM pg_stat_activity
		               WHERE datname = current_database() AND state = 'idle' AND query LIKE 'LISTEN %')`)
	return w, eng, scope
}

// engineWithRuleSink is a world and an engine, not serving, whose owner
// scope has one sink subscribed to rule.notify; its endpoint holds every
// request (it is never sent to here).
func engineWithRuleSink(t *testing.T) (*hosttest.World, *engine.Engine, notifytype.OwnerScope) {
	t.Helper()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	base := newServer(t, newGate(http.StatusOK).ServeHTTP)
	_, p, scope := w.Human()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.rules",
		Events: []notifytype.EventType{host.EventRuleNotify}})
	return w, eng, scope
}

// emitRuleEvents emits n rule.notify events of scope, each of its own
// subject (prefix#i), in one transaction.
func emitRuleEvents(t *testing.T, w *hosttest.World, eng *engine.Engine, scope notifytype.OwnerScope, prefix string, n int) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		for i := range n {
			if err := eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, fmt.Sprintf("%s#%d", prefix, i))); err != nil {
				return err
			}
		}
		return nil
	}))
}
