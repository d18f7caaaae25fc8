package engine

import (
	"context"

	"github.com/switchboard/notify/internal/enginehooks"
	"github.com/switchboard/notify/sinks"
)

// The test hooks, out of the API: engine/enginetest reaches them.
func init() {
	enginehooks.WrapAdapters = func(eng any, wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter) {
		eng.(*Engine).wrapAdapter = wrap
	}
	enginehooks.FanOut = func(ctx context.Context, eng any) (int, error) { return eng.(*Engine).fanOut(ctx, nil) }
	enginehooks.ClaimOnce = func(ctx context.Context, eng any) ([]int64, bool, bool, error) { return eng.(*Engine).claimOnce(ctx) }
}
