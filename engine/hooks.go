package engine

import (
	"context"

	"github.com/switchboard/notify/internal/enginehooks"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// The test hooks, out of the API: engine/enginetest reaches them.
func init() {
	enginehooks.WrapAdapters = func(eng any, wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter) {
		eng.(*Engine).wrapAdapter = wrap
	}
	enginehooks.FanOut = func(ctx context.Context, eng any) (int, error) { return eng.(*Engine).fanOut(ctx, nil) }
	enginehooks.ClaimOnce = func(ctx context.Context, eng any) ([]int64, bool, bool, error) { return eng.(*Engine).claimOnce(ctx) }
	enginehooks.Render = func(eng any, row store.OutboxRow, kept bool) sinks.Message {
		if kept {
			return eng.(*Engine).render(row)
		}
		msg, _ := eng.(*Engine).renderRow(row)
		return msg
	}
}
