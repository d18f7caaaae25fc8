// Package testhooks reaches what the engine keeps out of its API, for this
// repository's tests, faults suite and benchmarks only: production code
// never calls it, and an embedder cannot import it (it is internal). It imports no test framework, so a benchmark
// binary may use it.
package testhooks

import (
	"context"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginehooks"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// WrapAdapters makes every adapter eng builds pass through wrap, so a test
// or the faults suite can make one panic, stall or count its sends. Call
// it before the engine starts.
func WrapAdapters(eng *engine.Engine, wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter) {
	enginehooks.WrapAdapters(eng, wrap)
}

// FanOut runs eng's fan-out once, now: the outbox rows of the events
// committed so far exist when it returns. It reports how many events it
// took.
func FanOut(ctx context.Context, eng *engine.Engine) (int, error) {
	return enginehooks.FanOut(ctx, eng)
}

// SetDatabaseClock makes cfg's engine read every instant that instances
// compare (claims, due times, budgets, windows, retention) from c instead
// of the database's clock, so a test can move time with a fake clock; nil
// gives it the database's own clock back, as in production. The stand-in
// rides on cfg.Clock (a clock only this module can build), so Config has no
// hidden field for it; cfg.Clock keeps telling the local time as before.
func SetDatabaseClock(cfg *engine.Config, c clockwork.Clock) {
	local := cfg.Clock
	if tc, ok := local.(*enginehooks.TestClock); ok {
		local = tc.Clock
	}
	if c == nil {
		cfg.Clock = local
		return
	}
	if local == nil {
		local = clockwork.NewRealClock()
	}
	cfg.Clock = &enginehooks.TestClock{Clock: local, Database: c}
}

// ClaimPass is what one pass of the claimer did (ClaimOnce).
type ClaimPass struct {
	// Rows are the ids of the rows the pass claimed.
	Rows []int64
	// SearchedExpired reports that the pass also looked for rows whose
	// claim expired, or whose instance's heartbeat lapsed.
	SearchedExpired bool
	// WaitsForRoom reports that a serving claimer would next claim when
	// one of its actors takes a row (a mailbox was full, or rows are due
	// that the pass did not take), not only at its next due time or poll.
	WaitsForRoom bool
}

// ClaimOnce runs one pass of eng's claimer, as a serving claimer does on
// each wake (fan out, claim what is due on the database's clock and there
// is room for, hand it to the actors), at once and on the caller's
// goroutine, and says what it claimed: a test asserts that a row is not
// claimed at a given instant by a condition that can fail, instead of
// waiting some wall time for an attempt that should never come.
func ClaimOnce(ctx context.Context, eng *engine.Engine) (ClaimPass, error) {
	rows, searched, waits, err := enginehooks.ClaimOnce(ctx, eng)
	return ClaimPass{Rows: rows, SearchedExpired: searched, WaitsForRoom: waits}, err
}

// Render words row as eng's delivery does, with the wordings eng keeps
// (kept) or afresh, neither reading nor filling them: for the benchmark
// that compares the two.
func Render(eng *engine.Engine, row store.OutboxRow, kept bool) sinks.Message {
	return enginehooks.Render(eng, row, kept)
}

// WithDatabaseClock is cfg with SetDatabaseClock(c) applied.
func WithDatabaseClock(cfg engine.Config, c clockwork.Clock) engine.Config {
	SetDatabaseClock(&cfg, c)
	return cfg
}
