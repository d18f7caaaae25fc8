// Package enginehooks is how this module's test helpers (internal/testhooks,
// engine/enginetest) reach what the engine keeps out of its API: package
// engine sets these at init. Nothing outside the module can import it, and
// no production code of ours calls it.
package enginehooks

import (
	"context"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

var (
	// WrapAdapters makes every adapter the engine (an *engine.Engine)
	// builds pass through wrap. Set before Start.
	WrapAdapters func(eng any, wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter)

	// FanOut runs the engine's fan-out once, now.
	FanOut func(ctx context.Context, eng any) (int, error)

	// ClaimOnce runs one pass of the engine's claimer, now, and returns
	// the ids of the rows it claimed, whether it also looked for rows
	// whose claim expired, and whether the claimer would then wait for
	// room rather than for its next due time or poll.
	ClaimOnce func(ctx context.Context, eng any) (rows []int64, searchedExpired, waitsForRoom bool, err error)

	// Render words an outbox row as delivery does; kept false words it
	// afresh, neither reading nor filling the engine's kept wordings.
	Render func(eng any, row store.OutboxRow, kept bool) sinks.Message
)

// TestClock is a Config.Clock that also stands in for the database's clock:
// an engine configured with one reads every instant that instances compare
// (claims and their expiry, due times, budgets, windows, retention) from
// Database instead of the database's clock_timestamp(), so a test can move
// time with a fake clock. Local is the engine's own clock (Config.Clock
// proper). Only this module can build one (testhooks.SetDatabaseClock):
// the engine's Config has no hidden field for it.
type TestClock struct {
	clockwork.Clock
	Database clockwork.Clock
}
