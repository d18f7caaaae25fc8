package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/thejerf/suture/v4"
	"golang.org/x/time/rate"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Worker does an actor's work for one sink. Its methods must not block on
// the actor (they run on its goroutine) and must wrap their own errors into
// the Outcome: an actor never stops because a delivery failed.
type Worker interface {
	// Deliver attempts claimed rows of the sink, in the order given (the
	// order they were dispatched): the row the actor took and the rows
	// queued behind it, so that one reservation serves them all. It
	// reserves their tokens, sends them one after another and records
	// each. A row it reserved and did not send (its ctx ended before the
	// row's turn) it gives back, as if never attempted. Its Outcome is
	// the sink's after the last row.
	Deliver(ctx context.Context, rows []store.OutboxRow) Outcome
	// Flush sends every held row of the sink as one coalesced message when
	// a token is available.
	Flush(ctx context.Context, sinkID int64) Outcome
	// Release gives back claimed rows the actors will not attempt (the
	// supervisor is stopping, or a step gave back rows queued before
	// them: Outcome.GaveBack), so that any instance may take them at once
	// rather than after their claim expires. ctx is not cancelled.
	Release(ctx context.Context, rows []store.OutboxRow)
}

// Outcome is what one step of an actor left behind.
type Outcome struct {
	// HeldUntil is set when rows of the sink are held until a token returns
	// then (D9).
	HeldUntil time.Time
	// Held is how many rows of the sink are held after the step.
	Held int
	// Class is the failure class of the attempt, "" when it was delivered
	// or no attempt was made.
	Class notifytype.ErrorClass
	// Budget and TAT mirror the sink's bucket after the step (TAT zero
	// when the step read no budget).
	Budget Budget
	TAT    time.Time
	// GaveBack is set when the step gave back rows it had reserved and
	// not sent (their claim time ran out before their turn): the actor
	// then releases the rows queued behind them too, so that the next
	// claim takes the sink's rows again in the order they fell due, the
	// rows given back first. Sent after them, a row claimed later went
	// out while the earlier ones waited pending.
	GaveBack bool
}

// Budget is the bucket's shape, for the mirror.
type Budget struct {
	PerHour int
	Burst   int
}

// State is what an actor is doing.
type State string

const (
	StateIdle       State = "idle"
	StateDelivering State = "delivering"
	StateHolding    State = "holding"
	StateStopped    State = "stopped"
)

// Status is a snapshot of one actor, readable without blocking it.
type Status struct {
	SinkID    int64                 `json:"sink_id"`
	State     State                 `json:"state"`
	Tokens    float64               `json:"tokens"`
	Held      int                   `json:"held"`
	Queued    int                   `json:"queued"`
	InFlight  int                   `json:"in_flight"`
	NextWake  time.Time             `json:"next_wake,omitzero"`
	LastClass notifytype.ErrorClass `json:"last_error_class,omitempty"`
	Restarts  int                   `json:"restarts"`
	Delivered int64                 `json:"attempts"`
}

// SinkActor delivers the rows of one sink, one step at a time: a step
// attempts the rows queued when it began, in order, or flushes the held
// ones.
type SinkActor struct {
	sinkID  int64
	sup     *Supervisor
	mailbox *mailbox
	poke    chan struct{}

	// Owned by the actor's goroutine.
	limiter   *rate.Limiter
	flushAt   time.Time
	lastClass notifytype.ErrorClass
	held      int
	attempts  int64
	starts    int

	status atomic.Pointer[Status]
}

func newSinkActor(sup *Supervisor, sinkID int64) *SinkActor {
	a := &SinkActor{
		sinkID:  sinkID,
		sup:     sup,
		mailbox: newMailbox(sup.cfg.MailboxSize),
		poke:    make(chan struct{}, 1),
	}
	a.publish(StateIdle, 0)
	return a
}

// String names the actor in suture's logs.
func (a *SinkActor) String() string { return fmt.Sprintf("sink-actor-%d", a.sinkID) }

// Status returns the actor's latest snapshot.
func (a *SinkActor) Status() Status {
	s := *a.status.Load()
	s.Queued = a.mailbox.len()
	return s
}

// releaseQueued gives back the rows queued in the mailbox (Outcome.GaveBack),
// within ReleaseTimeout; a stop does not cut it short.
func (a *SinkActor) releaseQueued(ctx context.Context) {
	queued := a.mailbox.take()
	if len(queued) == 0 {
		return
	}
	a.sup.signalRoom()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	a.sup.worker.Release(rctx, queued)
}

// Serve runs the actor until its context ends or it has been idle for the
// supervisor's idle period, when it returns suture.ErrDoNotRestart.
func (a *SinkActor) Serve(ctx context.Context) error {
	a.starts++
	clock := a.sup.cfg.Clock
	idle := time.NewTimer(a.sup.cfg.IdleAfter)
	defer idle.Stop()
	var flush clockwork.Timer
	flushC := func() <-chan time.Time {
		if flush == nil {
			return nil
		}
		return flush.Chan()
	}
	disarm := func() {
		if flush != nil {
			flush.Stop()
		}
		flush, a.flushAt = nil, time.Time{}
	}
	arm := func(o Outcome, rows int) {
		a.observe(o, rows)
		if o.HeldUntil.IsZero() {
			return
		}
		disarm()
		a.flushAt = o.HeldUntil
		flush = clock.NewTimer(max(o.HeldUntil.Sub(a.sup.cfg.Now()), 0))
	}
	// flushed folds a flush's outcome in: a flush that leaves nothing held
	// (it sent every held row, or none was left) needs no timer, whoever
	// asked for it.
	flushed := func(o Outcome) {
		if o.HeldUntil.IsZero() {
			disarm()
		}
		arm(o, 1)
	}
	// deliver attempts the rows taken from the mailbox together: one
	// reservation for all of them rather than one each (a sink that
	// falls behind catches up in groups, and the database sees a
	// transaction a group). The mailbox bounds the group.
	deliver := func(rows []store.OutboxRow) {
		a.sup.signalRoom()
		a.publish(StateDelivering, len(rows))
		o := a.sup.runners.step(func() Outcome { return a.sup.worker.Deliver(ctx, rows) })
		if o.GaveBack {
			a.releaseQueued(ctx)
		}
		arm(o, len(rows))
	}
	defer func() {
		disarm()
		a.publish(StateStopped, 0)
	}()

	for {
		if ctx.Err() != nil {
			// Stopping: what is left in the mailbox is released by the
			// supervisor, not attempted.
			return ctx.Err()
		}
		a.publish(a.restingState(), 0)
		// The rows queued go first: they were claimed in the order they
		// fell due, and a flush taken before them (a select picks at
		// random among the cases ready) would send a held row that fell
		// due later ahead of them, and spend the token they were due.
		if rows := a.mailbox.take(); len(rows) > 0 {
			deliver(rows)
		} else {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-a.mailbox.ready:
				if rows := a.mailbox.take(); len(rows) > 0 {
					deliver(rows)
				}
			case <-a.poke:
				a.publish(StateDelivering, 1)
				flushed(a.sup.runners.step(func() Outcome { return a.sup.worker.Flush(ctx, a.sinkID) }))
			case <-flushC():
				flush, a.flushAt = nil, time.Time{}
				a.publish(StateDelivering, 1)
				flushed(a.sup.runners.step(func() Outcome { return a.sup.worker.Flush(ctx, a.sinkID) }))
			case <-idle.C:
				if flush == nil && a.sup.retire(a) {
					return fmt.Errorf("sink %d idle: %w", a.sinkID, suture.ErrDoNotRestart)
				}
			}
		}
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(a.sup.cfg.IdleAfter)
	}
}

// step runs one step of the worker on another goroutine and waits for it.
// The step's deep calls (the database, the HTTP client, a payload's JSON)
// grow that goroutine's stack, not the actor's: an actor waiting for work
// keeps the smallest stack, which is most of its memory when thousands are
// alive. The goroutine is one of the supervisor's runners, which waits for
// the next step once this one is done, so that its grown stack serves
// again: a new goroutine for every step copied its stack three or four
// times as it grew, 6 % of a one-instance drain's CPU. A panic in the step
// is raised again on the actor's goroutine, so suture restarts the actor
// as before.
func (rs *runners) step(f func() Outcome) Outcome {
	type result struct {
		o        Outcome
		panicked any
	}
	done := make(chan result, 1)
	rs.run(func(park func()) {
		var r result
		func() {
			defer func() {
				if v := recover(); v != nil {
					r = result{panicked: v}
				}
			}()
			r.o = f()
		}()
		// The runner waits for the next step before this one is answered,
		// so that the actor's next step finds it idle.
		park()
		done <- r
	})
	r := <-done
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.o
}

// maxIdleRunners bounds the runners that wait for a step: past it a runner
// whose step is done ends. An idle runner's stack is shrunk by the
// collector like any goroutine's, so the bound is on goroutines, not on
// stacks kept grown.
const maxIdleRunners = 256

// A job is one step on a runner: it calls park once its work is done and
// before it answers.
type job func(park func())

// runners are the goroutines that run the actors' steps. Each waits, once
// its step is done, for the next one on a channel of its own (buffered, so
// handing a step over never blocks); the most recently idle is handed the
// next step, its stack the likeliest to be grown. When the supervisor
// stops they end, and a step after that runs on a goroutine of its own.
type runners struct {
	mu     sync.Mutex
	idle   []chan job
	closed bool
}

// run hands j to an idle runner, or starts one.
func (rs *runners) run(j job) {
	rs.mu.Lock()
	if n := len(rs.idle); n > 0 {
		next := rs.idle[n-1]
		rs.idle = rs.idle[:n-1]
		rs.mu.Unlock()
		next <- j
		return
	}
	rs.mu.Unlock()
	go rs.loop(j)
}

// loop runs j, then every step handed to it while it could park: while
// the runners are open and fewer than maxIdleRunners wait. A nil job ends
// it.
func (rs *runners) loop(j job) {
	next := make(chan job, 1)
	for j != nil {
		parked := false
		j(func() { parked = rs.park(next) })
		if !parked {
			return
		}
		j = <-next
	}
}

// park lists the runner waiting on next among the idle, if there is room.
func (rs *runners) park(next chan job) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed || len(rs.idle) >= maxIdleRunners {
		return false
	}
	rs.idle = append(rs.idle, next)
	return true
}

// open lets runners wait for steps again (the supervisor serves).
func (rs *runners) open() {
	rs.mu.Lock()
	rs.closed = false
	rs.mu.Unlock()
}

// close ends the idle runners; a runner still in a step ends when it is
// done.
func (rs *runners) close() {
	rs.mu.Lock()
	rs.closed = true
	idle := rs.idle
	rs.idle = nil
	rs.mu.Unlock()
	for _, next := range idle {
		next <- nil
	}
}

func (a *SinkActor) restingState() State {
	if a.held > 0 || !a.flushAt.IsZero() {
		return StateHolding
	}
	return StateIdle
}

// observe folds the outcome of a step that attempted rows rows (a flush
// is one attempt) into the actor's own state and its mirror.
func (a *SinkActor) observe(o Outcome, rows int) {
	a.attempts += int64(rows)
	a.lastClass = o.Class
	a.held = o.Held
	if o.Budget.PerHour > 0 && !o.TAT.IsZero() {
		a.limiter = mirror(o.Budget, o.TAT, a.sup.cfg.Now())
	}
}

// mirror builds a limiter holding the tokens the database's bucket holds.
func mirror(b Budget, tat, now time.Time) *rate.Limiter {
	every := time.Hour / time.Duration(max(b.PerHour, 1))
	lim := rate.NewLimiter(rate.Every(every), b.Burst)
	used := float64(b.Burst) - tokensAt(b, tat, now)
	if used > 0 {
		lim.ReserveN(now, int(used+0.999999))
	}
	return lim
}

func tokensAt(b Budget, tat, now time.Time) float64 {
	every := time.Hour / time.Duration(max(b.PerHour, 1))
	if tat.Before(now) {
		tat = now
	}
	t := float64(now.Add(time.Duration(b.Burst)*every).Sub(tat)) / float64(every)
	return min(max(t, 0), float64(b.Burst))
}

func (a *SinkActor) publish(state State, inFlight int) {
	s := &Status{
		SinkID:    a.sinkID,
		State:     state,
		Held:      a.held,
		InFlight:  inFlight,
		NextWake:  a.flushAt,
		LastClass: a.lastClass,
		Restarts:  max(a.starts-1, 0),
		Delivered: a.attempts,
		Tokens:    -1,
	}
	if a.limiter != nil {
		s.Tokens = a.limiter.TokensAt(a.sup.cfg.Now())
	}
	a.status.Store(s)
}
