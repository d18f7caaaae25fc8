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
// claim's token. A graceful stop removes the heartbeat.
type heartbeat struct{ e *Engine }

func (h *heartbeat) String() string { return "heartbeat" }

// Serve beats until ctx ends, then removes the heartbeat.
func (h *heartbeat) Serve(ctx context.Context) error {
	e := h.e
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := store.Unbeat(sctx, e.cfg.Pool, e.instance); err != nil {
			e.log.Warn("error removing this instance's heartbeat", "error", err)
		}
	}()
	tick := e.cfg.Clock.NewTicker(e.cfg.HeartbeatEvery)
	defer tick.Stop()
	for {
		if err := h.beat(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("error recording this instance's heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.Chan():
		}
	}
}

func (h *heartbeat) beat(ctx context.Context) error {
	e := h.e
	now, err := e.now(ctx)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatEvery)
	defer cancel()
	return store.Beat(bctx, e.cfg.Pool, e.instance, now, e.cfg.HeartbeatTTL)
}

// Heartbeat defaults.
const (
	HeartbeatEveryDefault = 5 * time.Second
	HeartbeatTTLDefault   = 20 * time.Second
)
