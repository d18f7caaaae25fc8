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

// Beat records that instance is alive until now+ttl (outbox_instances,
// migration 0018): until then no claim takes the rows it holds before
// their own claims expire, and after it every claim may. It removes the
// rows of instances silent for a day.
func Beat(ctx context.Context, db BatchSender, instance string, now time.Time, ttl time.Duration) error {
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO switchboard.outbox_instances (name, started_at, alive_until) VALUES ($1, $2, $2::timestamptz + $3::interval)
		ON CONFLICT (name) DO UPDATE SET alive_until = excluded.alive_until`, instance, now, ttl)
	b.Queue(`DELETE FROM switchboard.outbox_instances WHERE alive_until < $1`, now.Add(-instanceForgetAfter))
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("error recording the heartbeat of %s: %w", instance, err)
	}
	return nil
}

// Unbeat removes instance's heartbeat (it stops): the rows it still holds
// wait for their claims to expire, as those of an instance that never
// beat.
func Unbeat(ctx context.Context, db DBTX, instance string) error {
	if _, err := db.Exec(ctx, `DELETE FROM switchboard.outbox_instances WHERE name = $1`, instance); err != nil {
		return fmt.Errorf("error removing the heartbeat of %s: %w", instance, err)
	}
	return nil
}
