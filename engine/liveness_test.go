package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// A 30-second database pause under three instances resends nothing that
// was delivered before it (issue 23, defect 4). Each instance has a send
// in flight when the database stops answering its writes: the sends
// reach their receivers, but neither the heartbeats nor the outcomes can
// be written, and the clock (the fake database clock every instance
// reads) moves 30 s on. On e6a7fa7 every instance's heartbeat had lapsed
// 20 s after its last beat, so each instance's next claim took the
// others' in-flight rows and sent them again once the database answered.
// Now an instance's rows are taken only a fence (the longest send, the
// record grace and one beat) after its heartbeat stopped letting it
// dispatch: when the database answers, each instance writes its outcomes
// first.
//
// The pause is played deterministically: a transaction of the test holds
// the heartbeat rows (FOR SHARE: a beat waits, a claim reads them) and
// the "sending" records of the attempts (FOR UPDATE: an outcome waits), as
// a paused server holds every write; each instance's claim is then run
// explicitly (testhooks.ClaimOnce) at the clock 30 s on.
func TestADatabasePauseUnderThreeInstancesResendsNothingDelivered(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	entered, release := make(chan int64, 8), make(chan struct{})
	var engines []*engine.Engine
	for i := range 3 {
		engines = append(engines, w.ServeWith(func(e *engine.Engine) {
			testhooks.WrapAdapters(e, func(sinkID int64, a sinks.Adapter) sinks.Adapter {
				return adapterFunc(func(ctx context.Context, m sinks.Message) sinks.Result {
					entered <- sinkID
					<-release
					return a.Deliver(ctx, m)
				})
			})
		}, func(c *engine.Config) { c.Instance = fmt.Sprintf("paused-%d", i) }))
	}
	var released atomic.Bool
	free := func() {
		if released.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(free) // before the engines stop (cleanups run last first)

	receivers := map[int64]*gotifyServer{}
	for i := range 3 {
		g := newGotify(t)
		_, p, scope := w.Human()
		sink := w.Sink(engines[0], p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: fmt.Sprintf("gtfya.pause-%d", i),
			Events: []notifytype.EventType{host.EventTodoDeadLettered}})
		receivers[sink] = g
		w.Emit(engines[0], deadLetterOf(scope, int64(i+1)))
	}
	for range 3 {
		select {
		case <-entered:
		case <-time.After(enginetest.WaitTimeout):
			t.Fatal("the three sends did not begin")
		}
	}
	var inFlight []int64
	rows, err := w.Pool.Query(w.Ctx, `SELECT id FROM switchboard.outbox WHERE state = 'claimed' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		inFlight = append(inFlight, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, inFlight, 3)

	// The database pauses: no beat and no outcome can be written.
	pause, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pause.Rollback(context.Background()) })
	_, err = pause.Exec(w.Ctx, `SELECT 1 FROM switchboard.outbox_instances FOR SHARE`)
	require.NoError(t, err)
	tag, err := pause.Exec(w.Ctx, `SELECT 1 FROM switchboard.delivery_records WHERE status = 'sending' FOR UPDATE`)
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected(), "three attempts in flight")

	// The sends complete meanwhile: each receiver has its message.
	free()
	require.Eventually(t, func() bool {
		for _, g := range receivers {
			if len(g.received()) == 0 {
				return false
			}
		}
		return true
	}, enginetest.WaitTimeout, 10*time.Millisecond, "the sends in flight did not reach their receivers")

	// 30 s pass. Every instance claims, its search for the rows of lapsed
	// instances included: none takes a row another instance is sending.
	w.Clock.Advance(30 * time.Second)
	for _, eng := range engines {
		poll := time.NewTicker(20 * time.Millisecond)
		deadline := time.After(enginetest.WaitTimeout)
		for searched := false; !searched; {
			pass, err := testhooks.ClaimOnce(w.Ctx, eng)
			require.NoError(t, err)
			for _, id := range pass.Rows {
				require.False(t, slices.Contains(inFlight, id),
					"%s took row %d 30 s into the pause while its instance was sending it", eng.InstanceForTest(), id)
			}
			searched = pass.SearchedExpired
			select {
			case <-poll.C:
			case <-deadline:
				t.Fatalf("%s's claims did not look for the rows of lapsed instances", eng.InstanceForTest())
			}
		}
		poll.Stop()
	}

	// The database answers again: each instance writes its outcome.
	require.NoError(t, pause.Rollback(w.Ctx))
	for _, a := range w.WaitN(3) {
		require.Equal(t, "delivered", a.State, "%+v", a)
		require.Equal(t, 1, a.Attempt)
	}
	for sink, g := range receivers {
		require.Len(t, g.received(), 1, "sink %d: delivered once, never sent again", sink)
		statuses, _ := recordsOf(t, w, sink)
		require.Equal(t, []string{"delivered/"}, statuses, "sink %d: one attempt, delivered", sink)
	}
	require.Equal(t, map[string]int{"delivered": 3}, w.RowStates())
}
