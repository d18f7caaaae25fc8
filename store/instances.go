package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// instanceForgetAfter is how long the heartbeat row of an instance that
// stopped beating is kept (what it held is taken long before).
const instanceForgetAfter = 24 * time.Hour

// Beat records that instance may start attempts until now+ttl
// (dispatch_until, migration 0022) and that it is alive, so that no other
// instance takes at once the rows it holds, until now+ttl+fence
// (alive_until). Neither instant moves back: a beat delayed past a later
// one (a paused connection) shortens nothing. It removes the rows of
// instances silent for a day, skipping any row a claim is reading.
//
// The fence is what makes a takeover safe: every statement that starts an
// attempt requires the instance's dispatch_until to be ahead of the
// database's clock (DispatchFence), so once its heartbeat lapses an
// instance starts nothing, and its rows are taken only a fence later,
// when every attempt it began has ended and had its grace to be recorded.
func Beat(ctx context.Context, db BatchSender, instance string, now time.Time, ttl, fence time.Duration) error {
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO switchboard.outbox_instances (name, started_at, dispatch_until, alive_until)
		VALUES ($1, $2, $2::timestamptz + $3::interval, $2::timestamptz + $3::interval + $4::interval)
		ON CONFLICT (name) DO UPDATE SET
		    dispatch_until = greatest(outbox_instances.dispatch_until, excluded.dispatch_until),
		    alive_until = greatest(outbox_instances.alive_until, excluded.alive_until)`, instance, now, ttl, fence)
	b.Queue(`
		DELETE FROM switchboard.outbox_instances WHERE name IN (
		    SELECT name FROM switchboard.outbox_instances WHERE alive_until < $1 FOR UPDATE SKIP LOCKED)`,
		now.Add(-instanceForgetAfter))
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("error recording the heartbeat of %s: %w", instance, err)
	}
	return nil
}

// Unbeat removes instance's heartbeat (it stops): it starts no attempt
// any more, and the rows it still holds wait for their claims to expire,
// as those of an instance that never beat.
func Unbeat(ctx context.Context, db DBTX, instance string) error {
	if _, err := db.Exec(ctx, `DELETE FROM switchboard.outbox_instances WHERE name = $1`, instance); err != nil {
		return fmt.Errorf("error removing the heartbeat of %s: %w", instance, err)
	}
	return nil
}

// DispatchFence is the condition, in SQL, that every statement starting
// an attempt carries: the instance named by the placeholder inst has a
// heartbeat whose dispatch_until is ahead of the database's clock at the
// moment the statement runs (clock_timestamp(), not the transaction's
// start nor an instant read before a pause), or of the instant at when a
// test's fake clock gives one (NULL otherwise). An instance that cannot
// beat therefore starts nothing, whatever its own code does; another
// instance takes its rows only a fence later (Beat, claimDueSQL).
func DispatchFence(inst, at string) string {
	return `EXISTS (SELECT 1 FROM switchboard.outbox_instances f WHERE f.name = ` + inst +
		` AND f.dispatch_until > coalesce(` + at + `::timestamptz, clock_timestamp()))`
}

// MayDispatch reports whether instance's heartbeat lets it start attempts
// at the database's clock (or at, when not zero): DispatchFence as a
// query, so that an engine tells a fenced start from a lost claim.
func MayDispatch(ctx context.Context, db DBTX, instance string, at time.Time) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT `+DispatchFence("$1", "$2"), instance, nullTime(at)).Scan(&ok); err != nil {
		return false, fmt.Errorf("error reading the heartbeat of %s: %w", instance, err)
	}
	return ok, nil
}

// QueueMayDispatch queues MayDispatch into b; ok gets its answer.
func QueueMayDispatch(b *pgx.Batch, instance string, at time.Time, ok *bool) {
	b.Queue(`SELECT `+DispatchFence("$1", "$2"), instance, nullTime(at)).QueryRow(func(row pgx.Row) error {
		return row.Scan(ok)
	})
}
