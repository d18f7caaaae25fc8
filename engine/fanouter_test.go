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
	w := hosttest.NewWorld(t)
	eng := w.Engine() // not serving: the pass below is the only fan-out
	base := newServer(t, newGate(http.StatusOK).ServeHTTP)
	_, p, scope := w.Human()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.backlog",
		Events: []notifytype.EventType{host.EventRuleNotify}})
	const events = engine.FanOutInlineForTest + 50
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		for i := range events {
			if err := eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, fmt.Sprintf("forge#%d", i))); err != nil {
				return err
			}
		}
		return nil
	}))

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
	w := hosttest.NewWorld(t)
	eng := w.Engine() // not serving: the test runs the pass and the service
	base := newServer(t, newGate(http.StatusOK).ServeHTTP)
	_, p, scope := w.Human()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.backlog",
		Events: []notifytype.EventType{host.EventRuleNotify}})
	const events = engine.FanOutInlineForTest + 50
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		for i := range events {
			if err := eng.Emit(w.Ctx, tx, ruleNotify(scope, 1, fmt.Sprintf("forge#%d", i))); err != nil {
				return err
			}
		}
		return nil
	}))
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
