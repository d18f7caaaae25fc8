// Package clocks tells time for the engine and its host: Database, the
// database's clock as one instance reads it (every instant that instances
// compare comes from it), Clock, what a host's code needs of a clock, and
// System, the wall clock.
package clocks

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
)

// resync is how often (of the local clock's elapsed time) a
// Database reads the database's clock again.
const resync = time.Minute

// readings is how many round trips one reading takes.
const readings = 3

// Database tells the database's time on this instance. Every instant
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
type Database struct {
	pool  *pgxpool.Pool
	local clockwork.Clock

	// mu guards the fields below. It is never held across acquiring a
	// connection or a query: a reading is taken unlocked and published
	// under it, so a pool whose connections are all held delays only the
	// callers that need a reading, each until its own ctx ends.
	mu      sync.Mutex
	dbAt    time.Time // the database's time at localAt
	localAt time.Time
	// reading is closed when the reading through the pool now in flight
	// ends (nil when none is): callers without a transaction of their own
	// wait for it, bounded by their ctx, rather than each taking a
	// connection.
	reading chan struct{}
}

// NewDatabase returns the database's clock as pool's server tells it,
// measured with local (the real clock when nil).
func NewDatabase(pool *pgxpool.Pool, local clockwork.Clock) *Database {
	if local == nil {
		local = clockwork.NewRealClock()
	}
	return &Database{pool: pool, local: local}
}

// Now returns the database's present time, reading it through a
// connection of the pool when the last reading is a minute old. ctx bounds
// the wait: with every connection of the pool held, Now returns ctx's
// error once ctx ends, and never holds up another caller.
func (c *Database) Now(ctx context.Context) (time.Time, error) {
	for {
		c.mu.Lock()
		if t, ok := c.freshLocked(); ok {
			c.mu.Unlock()
			return t, nil
		}
		if wait := c.reading; wait != nil {
			// Another caller is reading: wait for its reading, or for
			// our ctx, whichever ends first.
			c.mu.Unlock()
			select {
			case <-wait:
				continue // fresh now, or it failed and we read ourselves
			case <-ctx.Done():
				return time.Time{}, fmt.Errorf("error reading the database's clock: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		c.reading = done
		c.mu.Unlock()

		t, err := c.readPool(ctx)

		c.mu.Lock()
		c.reading = nil
		c.mu.Unlock()
		close(done)
		return t, err
	}
}

// Querier is what NowIn reads through: a pgx.Tx, a *pgx.Conn or a
// *pgxpool.Conn.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NowIn is Now for a caller inside a transaction: a reading, when one is
// due, goes through q (the caller's transaction) rather than another connection of the pool (which
// the caller's own transactions may all hold), and waits for no other
// caller's reading.
func (c *Database) NowIn(ctx context.Context, q Querier) (time.Time, error) {
	c.mu.Lock()
	t, ok := c.freshLocked()
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	return c.read(ctx, q)
}

// freshLocked returns the database's time from the last reading while it
// is less than a minute old.
func (c *Database) freshLocked() (time.Time, bool) {
	if c.localAt.IsZero() {
		return time.Time{}, false
	}
	if elapsed := c.local.Since(c.localAt); elapsed >= 0 && elapsed < resync {
		return c.dbAt.Add(elapsed), true
	}
	return time.Time{}, false
}

// readPool reads the database's clock through a connection of the pool.
func (c *Database) readPool(ctx context.Context) (time.Time, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("error reading the database's clock: %w", err)
	}
	defer conn.Release()
	return c.read(ctx, conn)
}

// read takes a reading through q, without the lock, and publishes it.
func (c *Database) read(ctx context.Context, q Querier) (time.Time, error) {
	// The reading is taken halfway through the round trip; of a few
	// tries, the quickest round trip bounds the error best.
	var (
		best          time.Duration = -1
		dbAt, localAt time.Time
	)
	for range readings {
		before := c.local.Now()
		var t time.Time
		if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
			return time.Time{}, fmt.Errorf("error reading the database's clock: %w", err)
		}
		after := c.local.Now()
		if rtt := after.Sub(before); best < 0 || rtt < best {
			best = rtt
			dbAt, localAt = t.Add(rtt/2), after
		}
	}
	c.mu.Lock()
	if localAt.After(c.localAt) {
		c.dbAt, c.localAt = dbAt, localAt
	}
	c.mu.Unlock()
	return dbAt, nil
}

// readTimeout bounds a reading made for AsClock.
const readTimeout = 5 * time.Second

// AsClock adapts c to Clock, for a host's code with no context at hand (the
// reference host's leases). A failed reading falls back to the local clock:
// the statement that follows fails too when the database is unreachable.
func (c *Database) AsClock() Clock { return databaseAdapter{c} }

type databaseAdapter struct{ c *Database }

func (a databaseAdapter) Now() time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	t, err := a.c.Now(ctx)
	if err != nil {
		return a.c.local.Now()
	}
	return t
}

// Clock tells the time: what a host needs of a clock (a clockwork.Clock is
// one).
type Clock interface {
	Now() time.Time
}

// System is the wall clock.
type System struct{}

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }
