package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/store"
)

// databaseClockResync is how often (of the local clock's elapsed time) a
// DatabaseClock reads the database's clock again.
const databaseClockResync = time.Minute

// databaseClockReadings is how many round trips one reading takes.
const databaseClockReadings = 3

// DatabaseClock tells the database's time on this instance. Every instant
// that two instances compare (claims and their expiry, due times, budget
// arithmetic, leases) is taken from it, so instances whose own clocks
// disagree still agree on every claim, due time and budget.
//
// It reads clock_timestamp() once, then once a minute, and in between adds
// the time elapsed on the local clock (monotonic for the real clock): the
// offset of a wrong local clock cancels out, and only half the quickest of
// three round trips and a minute's drift remain (milliseconds against a
// claim TTL of minutes and a budget interval of at least 30 s). So Now
// costs no round trip on the host's path.
type DatabaseClock struct {
	pool  *pgxpool.Pool
	local clockwork.Clock

	mu      sync.Mutex
	dbAt    time.Time // the database's time at localAt
	localAt time.Time
}

// NewDatabaseClock returns the database's clock as pool's server tells it,
// measured with local (the real clock when nil).
func NewDatabaseClock(pool *pgxpool.Pool, local clockwork.Clock) *DatabaseClock {
	if local == nil {
		local = clockwork.NewRealClock()
	}
	return &DatabaseClock{pool: pool, local: local}
}

// Now returns the database's present time, reading it through a
// connection of the pool when the last reading is a minute old.
func (c *DatabaseClock) Now(ctx context.Context) (time.Time, error) {
	return c.now(ctx, nil)
}

// NowIn is Now for a caller inside a transaction: a reading, when one is
// due, goes through tx rather than another connection of the pool (which
// the caller's own transactions may all hold).
func (c *DatabaseClock) NowIn(ctx context.Context, tx store.DBTX) (time.Time, error) {
	return c.now(ctx, tx)
}

func (c *DatabaseClock) now(ctx context.Context, db store.DBTX) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.localAt.IsZero() {
		if elapsed := c.local.Since(c.localAt); elapsed >= 0 && elapsed < databaseClockResync {
			return c.dbAt.Add(elapsed), nil
		}
	}
	if db == nil {
		conn, err := c.pool.Acquire(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("error reading the database's clock: %w", err)
		}
		defer conn.Release()
		db = conn
	}
	// The reading is taken halfway through the round trip; of a few
	// tries, the quickest round trip bounds the error best.
	var best time.Duration = -1
	for range databaseClockReadings {
		before := c.local.Now()
		var t time.Time
		if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
			return time.Time{}, fmt.Errorf("error reading the database's clock: %w", err)
		}
		after := c.local.Now()
		if rtt := after.Sub(before); best < 0 || rtt < best {
			best = rtt
			c.dbAt, c.localAt = t.Add(rtt/2), after
		}
	}
	return c.dbAt, nil
}

// now is the database's time (see DatabaseClock), or Config.DatabaseClock's
// when a test set one.
func (e *Engine) now(ctx context.Context) (time.Time, error) {
	if e.cfg.databaseClock != nil {
		return e.cfg.databaseClock.Now(), nil
	}
	return e.dbClock.Now(ctx)
}

// nowIn is now for a caller inside tx (Emit, in the host's transaction).
func (e *Engine) nowIn(ctx context.Context, tx store.DBTX) (time.Time, error) {
	if e.cfg.databaseClock != nil {
		return e.cfg.databaseClock.Now(), nil
	}
	return e.dbClock.NowIn(ctx, tx)
}

// nowOrLocal is now for what only waits on it (a timer's length, a status
// mirror): on a database error it falls back to the local clock.
func (e *Engine) nowOrLocal(ctx context.Context) time.Time {
	t, err := e.now(ctx)
	if err != nil {
		return e.cfg.Clock.Now()
	}
	return t
}

// databaseClockReadTimeout bounds a reading made for AsClock.
const databaseClockReadTimeout = 5 * time.Second

// AsClock adapts c to Clock, for a host's code with no context at hand (the
// reference host's leases). A failed reading falls back to the local clock:
// the statement that follows fails too when the database is unreachable.
func (c *DatabaseClock) AsClock() Clock { return databaseClockAdapter{c} }

type databaseClockAdapter struct{ c *DatabaseClock }

func (a databaseClockAdapter) Now() time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), databaseClockReadTimeout)
	defer cancel()
	t, err := a.c.Now(ctx)
	if err != nil {
		return a.c.local.Now()
	}
	return t
}
