package engine

import (
	"context"
	"time"

	"github.com/switchboard/notify/store"
)

// now is the database's time (see clocks.Database), or the stand-in's when a
// test set one (testDBClock).
func (e *Engine) now(ctx context.Context) (time.Time, error) {
	if e.testDBClock != nil {
		return e.testDBClock.Now(), nil
	}
	return e.dbClock.Now(ctx)
}

// nowIn is now for a caller inside tx (Emit, in the host's transaction).
func (e *Engine) nowIn(ctx context.Context, tx store.DBTX) (time.Time, error) {
	if e.testDBClock != nil {
		return e.testDBClock.Now(), nil
	}
	return e.dbClock.NowIn(ctx, tx)
}

// statementNow is the instant for a statement that takes the database's
// now() when given zero (store's coalesce($n, now())): zero in production,
// so the statement decides on the database's own clock; the test clock's
// time when a test set one.
func (e *Engine) statementNow() time.Time {
	if e.testDBClock != nil {
		return e.testDBClock.Now()
	}
	return time.Time{}
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
