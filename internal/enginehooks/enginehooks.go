// Package enginehooks is how this module's test helpers (engine/enginetest)
// reach what the engine keeps out of its API: package engine sets these at
// init. Nothing outside the module can import it, and no production code of
// ours calls it.
package enginehooks

import (
	"context"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/sinks"
)

var (
	// WrapAdapters makes every adapter the engine (an *engine.Engine)
	// builds pass through wrap. Set before Start.
	WrapAdapters func(eng any, wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter)

	// FanOut runs the engine's fan-out once, now.
	FanOut func(ctx context.Context, eng any) (int, error)

	// SetDatabaseClock makes the configuration (an *engine.Config) read
	// every instant that instances compare from c instead of the
	// database; nil gives the database's clock back.
	SetDatabaseClock func(cfg any, c clockwork.Clock)

	// ClaimOnce runs one pass of the engine's claimer, now, and returns
	// the ids of the rows it claimed and whether it also looked for rows
	// whose claim expired.
	ClaimOnce func(ctx context.Context, eng any) (rows []int64, searchedExpired bool, err error)
)
