package engine

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard/notify/store"
)

// heartbeat keeps this instance known alive (store.Beat) every
// Config.HeartbeatEvery. Each beat lets the instance start attempts for
// Config.HeartbeatTTL (dispatch_until), and keeps its rows its own for a
// fence more (alive_until, Config.HeartbeatFence): the longest send, the
// record grace and one beat.
//
// The fence is liveness made safe (issue 23, defect 4). Every statement
// that starts an attempt requires this instance's dispatch_until to be
// ahead of the database's clock (store.DispatchFence), so an instance
// that cannot beat (a database paused or failing over, a pool the host
// saturated, a GC or VM pause) stops dispatching on its own, in the
// database; the other instances take its rows at once only from
// alive_until, when every attempt it began has ended and had its record
// grace: a takeover never races a send that is still to be recorded in
// time. A database pause shorter than HeartbeatTTL + HeartbeatFence −
// HeartbeatEvery (less the time the recorder takes to try again, 2 s at
// most) therefore resends nothing: when the database answers again, the
// instance writes its outcomes and beats before its rows may be taken.
//
// When an instance dies, its heartbeat lapses and the other instances'
// claims take the rows it held from alive_until, the rows it had only
// queued included, instead of waiting out each row's claim (ClaimTTL).
// While it beats, its rows are taken only once their claims expire: at
// least once either way, and a row taken from an instance that was merely
// slow is refused to it by its claim's token. A graceful stop removes the
// heartbeat last, once the recorder has written what the actors sent.
type heartbeat struct{ e *Engine }

func (h *heartbeat) String() string { return "heartbeat" }

// beatRetry is how soon a beat that failed is tried again: an instance
// that could not beat through an outage beats again within it of the
// database's return, well inside the fence.
const beatRetry = time.Second

// Serve beats until the engine has stopped and its recorder has written
// what the actors sent (so the instance stays alive to the others while it
// may still be sending), then removes the heartbeat. It beats every
// HeartbeatEvery, beatRetry after a failed beat, and at once when a
// reservation found this instance fenced (beats.ask).
func (h *heartbeat) Serve(ctx context.Context) error {
	e := h.e
	live := context.WithoutCancel(ctx) // beats go on through the stop
	tick := e.cfg.Clock.NewTicker(e.cfg.HeartbeatEvery)
	defer tick.Stop()
	for {
		var retry <-chan time.Time
		if err := h.beat(live); err != nil {
			e.log.Error("error recording this instance's heartbeat", "error", err)
			retry = e.cfg.Clock.After(beatRetry)
		}
		select {
		case <-e.recorder.done: // closed only once the engine stopped
			sctx, cancel := context.WithTimeout(live, UnbeatTimeout)
			defer cancel()
			if err := store.Unbeat(sctx, e.cfg.Pool, e.instance); err != nil {
				e.log.Warn("error removing this instance's heartbeat", "error", err)
			}
			return ctx.Err()
		case <-tick.Chan():
		case <-e.beats.poke:
		case <-retry:
		}
	}
}

func (h *heartbeat) beat(ctx context.Context) error { return h.e.beat(ctx) }

// beat records one heartbeat and tells those waiting for one.
func (e *Engine) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatEvery)
	defer cancel()
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	if err := store.Beat(ctx, e.cfg.Pool, e.instance, now, e.cfg.HeartbeatTTL, e.cfg.HeartbeatFence()); err != nil {
		return err
	}
	e.beats.beaten()
	return nil
}

// beats lets a reservation that found this instance fenced (its heartbeat
// lapsed: errFenced) ask for a beat and wait for it.
type beats struct {
	poke chan struct{}
	mu   sync.Mutex
	next chan struct{} // closed by the next successful beat
}

func newBeats() *beats { return &beats{poke: make(chan struct{}, 1), next: make(chan struct{})} }

// waiter returns a channel closed by the next successful beat.
func (b *beats) waiter() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next
}

func (b *beats) beaten() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.next)
	b.next = make(chan struct{})
}

// ask wakes the heartbeat to beat now, without blocking.
func (b *beats) ask() { wakeUp(b.poke) }

// Heartbeat defaults.
const (
	HeartbeatEveryDefault = 5 * time.Second
	HeartbeatTTLDefault   = 20 * time.Second
)
