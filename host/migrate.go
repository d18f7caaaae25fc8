package host

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine/enginemigrate"
	"github.com/switchboard/notify/host/hoststore"
)

// Migrate brings a database up to date for the reference product: the
// engine's migrations first (enginemigrate.Up: the schema switchboard),
// then the host's own set (humans, teams, endpoints, queues, todos,
// webhooks, ... in the connection's current schema, recorded in
// host_migrations), whose owner columns use the engine's owner_scope
// domain. A database an older build migrated (one history,
// schema_migrations) is converted in place by the first of the two.
func Migrate(ctx context.Context, db hoststore.Beginner) error {
	if err := enginemigrate.Up(ctx, db); err != nil {
		return err
	}
	return hoststore.Migrate(ctx, db)
}

// CleanUp is the reference host's housekeeping, for engine.Config.HostCleanUp:
// it removes received webhook deliveries (with their routing traces and
// the quarantine) older than before, in deletes of at most batch rows,
// and sessions, login links and webhook message ids spent at now, through
// the janitor's own connection.
func CleanUp(log *slog.Logger) func(ctx context.Context, db *pgx.Conn, now, before time.Time, batch int) error {
	return func(ctx context.Context, db *pgx.Conn, now, before time.Time, batch int) error {
		x, err := hoststore.PruneExpired(ctx, db, before, batch)
		if x.WebhookDeliveries > 0 {
			log.Info("removed expired webhook deliveries", "webhook_deliveries", x.WebhookDeliveries,
				"older_than", before.Format(time.RFC3339))
		}
		if err != nil {
			return err
		}
		p, err := hoststore.PruneSpent(ctx, db, now)
		if err != nil {
			return err
		}
		if p.Sessions+p.LoginLinks+p.WebhookMessageIDs > 0 {
			log.Info("removed spent sessions, login links and webhook message ids",
				"sessions", p.Sessions, "login_links", p.LoginLinks, "webhook_message_ids", p.WebhookMessageIDs)
		}
		return nil
	}
}
