package engine

import (
	"context"
	"time"

	"github.com/switchboard/notify/store"
)

// heartbeat keeps this instance known alive (store.Beat) every
// Config.HeartbeatEvery, for Config.HeartbeatTTL. When an instance dies,
// its heartbeat lapses and the other instances' claims take the rows it
// held at once, the rows it had only queued included, instead of waiting
// out each row's claim (ClaimTTL). While it beats, its rows are taken only
// once their claims expire, as before: at least once either way, and a
// row taken from an instance that was merely slow is refused to it by its
// claim's token. A graceful stop removes the heartbeat last, once the
// recorder has written what the actors sent: until then no other instance
// takes at once a row this one may still be sending.
type heartbeat struct{ e *Engine }

func (h *heartbeat) String() string { return "heartbeat" }

// Serve beats until the engine has stopped and its recorder has written
// what the actors sent (so the instance stays alive to the others while it
// may still be sending), then removes the heartbeat.
func (h *heartbeat) Serve(ctx context.Context) error {
	e := h.e
	live := context.WithoutCancel(ctx) // beats go on through the stop
	tick := e.cfg.Clock.NewTicker(e.cfg.HeartbeatEvery)
	defer tick.Stop()
	for {
		if err := h.beat(live); err != nil {
			e.log.Error("error recording this instance's heartbeat", "error", err)
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
		}
	}
}

func (h *heartbeat) beat(ctx context.Context) error {
	e := h.e
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatEvery)
	defer cancel()
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	return store.Beat(ctx, e.cfg.Pool, e.instance, now, e.cfg.HeartbeatTTL)
}

// Heartbeat defaults.
const (
	HeartbeatEveryDefault = 5 * time.Second
	HeartbeatTTLDefault   = 20 * time.Second
)
