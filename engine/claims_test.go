package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// gate is a sink endpoint that holds every request until it is opened,
// then answers with status; it records the titles it was sent.
type gate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
	status  atomic.Int64
	mu      sync.Mutex
	titles  []string
}

func newGate(status int) *gate {
	g := &gate{arrived: make(chan struct{}, 64), open: make(chan struct{})}
	g.status.Store(int64(status))
	return g
}

func (g *gate) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct{ Title string }
	_ = json.Unmarshal(body, &m)
	g.mu.Lock()
	g.titles = append(g.titles, m.Title)
	g.mu.Unlock()
	g.arrived <- struct{}{}
	<-g.open
	rw.WriteHeader(int(g.status.Load()))
	_, _ = rw.Write([]byte(`{"id": 1}`))
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
func (g *gate) received() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.titles...)
}

func emitToSink(t *testing.T, w *hosttest.World, eng *engine.Engine, sink int64, ev engine.Event) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		ok, err := eng.EmitToSink(w.Ctx, tx, sink, ev)
		require.True(t, ok)
		return err
	}))
}

// A repeat of a row's key that arrives while the row is claimed opens a
// new row (the claimed one is not open for coalescing). When the attempt
// fails and the row goes back to pending, the two would both be open: one
// takes the other in rather than failing on outbox_open_key, which stalled
// every outcome of the instance (the statement itself:
// TestARowGoingBackTakesInTheRepeatOfItsKey). Both events reach the sink,
// as one message once it recovers, and no outcome is given up.
func TestARepeatDuringItsRowsAttemptJoinsTheRetry(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGate(http.StatusInternalServerError)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: newServer(t, g.ServeHTTP), Secret: "gtfya.repeat",
		Events: []notifytype.EventType{host.EventRuleNotify}})

	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.TableJSON("outbox", "payload"))
			t.Log(w.Logs.String())
		}
	})
	ev := ruleNotify(scope, 1, "forge#12")
	emitToSink(t, w, eng, sink, ev)
	<-g.arrived // the row is claimed and its attempt is being sent
	emitToSink(t, w, eng, sink, ev)
	require.Eventually(t, func() bool {
		return w.F.Count(`SELECT count(*) FROM switchboard.outbox`) == 2
	}, enginetest.WaitTimeout, 5*time.Millisecond, "the repeat opens a row of its own")

	g.release()
	a := w.Wait()
	require.Equal(t, "pending", a.State, "the failed attempt is recorded: a retry is due")
	g.status.Store(http.StatusOK)
	for w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE state <> 'delivered'`) > 0 {
		var due *time.Time
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT min(due_at) FROM switchboard.outbox WHERE state = 'pending'
			AND NOT EXISTS (SELECT 1 FROM switchboard.outbox WHERE state = 'claimed')`).Scan(&due))
		if due != nil && due.After(w.Clock.Now()) {
			w.Clock.Advance(due.Sub(w.Clock.Now()))
		}
		w.Wait()
	}
	// Whichever row took the other in (or none, when the repeat was
	// claimed before the first attempt failed), both events reached the
	// sink.
	var events int
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT sum(delivered_count) FROM switchboard.outbox`).Scan(&events))
	require.Equal(t, 2, events, w.TableJSON("outbox", "payload"))
	require.Zero(t, eng.OutcomesDropped())
	require.NotContains(t, w.Logs.String(), "error recording")
}

// A failed attempt's row goes back to pending when the recorder commits its
// outcome, and the recorder forgets the copy it had handed over only after
// that commit. A claim in between (the retry was already due: the send
// took longer than its backoff) takes the row again while the ended copy
// is still listed as handed, in one claim with the sink's later rows. The
// claim's copy goes to the actor in its turn, ahead of them. It used to be
// given the ended copy's token back: it stayed claimed with no copy to send
// it until its claim expired, while the later rows went out before it (the
// order within one instance broken; found by the state machine,
// properties/statemachine_test.go, seed 5202105899283342291).
func TestARowClaimedAgainBeforeItsEndedCopyIsForgottenGoesOutInItsTurn(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGate(http.StatusOK)
	g.release()
	_, p, scope := w.Human()
	eng := w.Engine() // not serving until the claim: the test plays the first copy's actor and recorder
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: newServer(t, g.ServeHTTP), Secret: "gtfya.turn",
		PerHour: 60, Burst: 4, Events: []notifytype.EventType{host.EventRuleNotify}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.TableJSON("outbox", "payload"))
		}
	})
	instance := eng.InstanceForTest()

	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#1"))
	rows, err := store.ClaimDue(w.Ctx, w.Pool, store.ClaimParams{
		Instance: instance, Now: w.Clock.Now(), TTL: engine.ClaimTTLDefault, Limit: 10, PerSink: 10,
	})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	first := rows[0]
	eng.HandForTest(first)
	// Its attempt failed: the recorder commits the outcome, a retry due in
	// 30 s, and has not forgotten the copy yet. The send took longer.
	require.NoError(t, store.FinishRows(w.Ctx, w.Pool, []store.Claimed{first.Claim()}, instance,
		store.RowOutcome{State: "pending", Class: string(notifytype.ClassServer), DueAt: w.Clock.Now().Add(engine.RetryDelay(2))},
		w.Clock.Now(), store.Replacements{By: []string{"relay.exhausted"}, Of: []string{"todo.dead_lettered"}}))
	w.Clock.Advance(engine.RetryDelay(2) + time.Second)
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))

	// One claim takes the retry and the later row, in that order.
	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Len(t, pass.Rows, 2)
	require.Equal(t, first.ID, pass.Rows[0])
	second := pass.Rows[1]

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine stopped with: %v", err)
		}
	})
	a := w.Wait()
	require.Equal(t, []int64{first.ID}, a.Rows, "the retry goes out first, in its turn")
	require.Equal(t, "delivered", a.State)
	a = w.Wait()
	require.Equal(t, []int64{second}, a.Rows)
	require.Equal(t, "delivered", a.State)
	require.Len(t, g.received(), 2, "each row sent once")
}

// A row whose claim expires while its copy waits in its actor's mailbox
// (a slow send ahead of it) is not taken again by its own instance's
// claimer, which would hand over a second copy: the copy already queued
// goes on, under its claim. Each row is sent once.
func TestAnExpiredClaimOfAQueuedRowHandsNoSecondCopy(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGate(http.StatusOK)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: newServer(t, g.ServeHTTP), Secret: "gtfya.copies",
		Events: []notifytype.EventType{host.EventRuleNotify}})

	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#1"))
	<-g.arrived // the first row is being sent
	emitToSink(t, w, eng, sink, ruleNotify(scope, 1, "forge#2"))
	require.Eventually(t, func() bool {
		st := eng.SinkStatusesOfForTest(sink)
		return len(st) == 1 && st[0].Queued == 1
	}, enginetest.WaitTimeout, 5*time.Millisecond, "the second row waits in the mailbox")

	// Both claims expire; two searches for expired claims run after it.
	searches := eng.ExpiredSearchesForTest()
	w.Clock.Advance(engine.ClaimTTLDefault + time.Second)
	require.Eventually(t, func() bool { return eng.ExpiredSearchesForTest() >= searches+2 },
		enginetest.WaitTimeout, 5*time.Millisecond)
	st := eng.SinkStatusesOfForTest(sink)
	require.Len(t, st, 1)
	require.Equal(t, 1, st[0].Queued, "no second copy was queued")

	g.release()
	for _, a := range w.WaitN(2) {
		require.Equal(t, "delivered", a.State, "each copy's outcome is written under its claim")
	}
	require.Len(t, g.received(), 2, "each row sent once")
	require.Equal(t, map[string]int{"delivered": 2}, w.RowStates())
	require.Empty(t, logLines(w, "outbox row claim lost before its attempt"), w.Logs.String())
}

// An outcome the database refuses is written on its own, tried a few
// times, then given up (logged and counted): the outcomes written with it
// land, and the recorder goes on. On 5499c8a the recorder tried the whole
// group again for ever, and every later outcome of the instance waited.
func TestAnOutcomeThatCannotBeWrittenHoldsNoOtherBack(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	_, _, scope := w.Human()
	eng := w.Engine()
	sink := w.F.Sink(storetest.SinkOpts{Owner: scope})
	instance := eng.Config().Instance
	var fs []store.Finished
	for i := range 3 {
		var id, rec int64
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `
			INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, payload, due_at, state, claimed_by,
			                    claim_expires_at, claim_token, attempts)
			VALUES ($1, $2, 'todo.dead_lettered', 'normal', '{}', now(), 'claimed', $3, now() + interval '1 minute', 7, 1)
			RETURNING id`, sink, scope.String(), instance).Scan(&id))
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `
			INSERT INTO switchboard.delivery_records (sink_id, owner, outbox_id, event_type, status, sent_at)
			VALUES ($1, $2, $3, 'todo.dead_lettered', 'sending', now()) RETURNING id`, sink, scope.String(), id).Scan(&rec))
		status := "delivered"
		if i == 1 {
			status = "lost in the post" // refused by the records' check constraint
		}
		fs = append(fs, store.Finished{RecordID: rec, Rows: []store.Claimed{{ID: id, Token: 7}}, Status: status,
			Outcome: store.RowOutcome{State: "delivered"}, At: time.Now()})
	}
	done := make(chan struct{})
	go func() {
		eng.RecordForTest(fs)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(enginetest.WaitTimeout):
		t.Fatal("the recorder is still trying the group")
	}
	require.Equal(t, map[string]int{"delivered": 2, "claimed": 1}, w.RowStates())
	require.EqualValues(t, 1, eng.OutcomesDropped())
	require.Len(t, logLines(w, "error recording a delivery outcome; given up, its rows are sent again when their claims expire"), 1)
}

// A claim is sized by the sinks that can take rows (half a mailbox for
// each actor with room, and for two sinks more), not by the actors' room
// alone: sized so, a claim with most mailboxes full read thousands of
// their rows to take a few dozen. One pass still takes every row there is
// room for: the first claim of a pass over more sinks without an actor
// than it is sized for (two sinks' half mailboxes: one mailbox of rows) is
// followed by one sized for the actors it started, and the pass claims
// again while a claim takes all it was sized for.
func TestOnePassClaimsTheDueRowsOfManySinksWithoutActors(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGate(http.StatusOK)
	g.release()
	var (
		p     engine.Principal
		scope notifytype.OwnerScope
	)
	eng := w.Engine() // not serving: the pass below is the only claim
	base := newServer(t, g.ServeHTTP)
	// More sinks, one row each, than the first claim takes; ten to an
	// owner scope, the most it may have.
	const sinks = actors.MailboxSizeDefault + 16
	for i := range sinks {
		if i%10 == 0 {
			_, p, scope = w.Human()
		}
		sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.many",
			Events: []notifytype.EventType{host.EventRuleNotify}})
		emitToSink(t, w, eng, sink, ruleNotify(scope, 1, fmt.Sprintf("forge#%d", i)))
	}
	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Len(t, pass.Rows, sinks, "one pass claims every sink's due row")
	require.Equal(t, map[string]int{"claimed": sinks}, w.RowStates())
}

// A claimer whose pass leaves rows due that it did not take claims again
// when one of its actors takes a row, not only at its next poll: in
// three-instance drains, each instance's claims lost the rows another's
// running claim had locked (SKIP LOCKED), took fewer than they were sized
// for, and waited for their polls with rows due, so that no message went
// out for half a second (docs/BENCHMARKS.md, session 18). Here the test
// holds one sink's row locked, as another instance's claim would: the pass
// takes the other sink's row and waits for room; with the lock gone, the
// next pass takes the row, and with nothing left due, does not.
func TestAClaimerThatTookLessThanWasDueClaimsAgainWhenRoomFrees(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine() // not serving: the passes below are the only claims
	base := newServer(t, newGate(http.StatusOK).ServeHTTP)
	_, p, scope := w.Human()
	var sinks [2]int64
	for i := range sinks {
		sinks[i] = w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: base, Secret: "gtfya.left",
			Events: []notifytype.EventType{host.EventRuleNotify}})
		emitToSink(t, w, eng, sinks[i], ruleNotify(scope, 1, fmt.Sprintf("forge#%d", i)))
	}
	_, err := testhooks.FanOut(w.Ctx, eng)
	require.NoError(t, err)
	var rowOf [2]int64
	for i, sink := range sinks {
		require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT id FROM switchboard.outbox WHERE sink_id = $1`, sink).Scan(&rowOf[i]))
	}

	other, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(w.Ctx) }()
	_, err = other.Exec(w.Ctx, `SELECT id FROM switchboard.outbox WHERE id = $1 FOR UPDATE`, rowOf[1])
	require.NoError(t, err)
	pass, err := testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Equal(t, []int64{rowOf[0]}, pass.Rows, "the locked row is skipped")
	require.True(t, pass.WaitsForRoom, "a row is due that the pass did not take")

	require.NoError(t, other.Rollback(w.Ctx))
	pass, err = testhooks.ClaimOnce(w.Ctx, eng)
	require.NoError(t, err)
	require.Equal(t, []int64{rowOf[1]}, pass.Rows)
	require.False(t, pass.WaitsForRoom, "nothing is left due")
}
