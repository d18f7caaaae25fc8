package hoststore

import (
	"context"
	"fmt"
	"time"
)

// Pruned counts what PruneSpent removed.
type Pruned struct {
	Sessions   int64
	LoginLinks int64
	// WebhookMessageIDs: webhook message ids past their expiry (their
	// timestamp, the tolerance and a margin): a repeat is refused as stale.
	WebhookMessageIDs int64
}

// PruneSpent removes what of the reference host's is of no more use:
// sessions expired at now, login links used or expired at now, and
// webhook message ids expired at now.
func PruneSpent(ctx context.Context, db DBTX, now time.Time) (Pruned, error) {
	var p Pruned
	for _, s := range []struct {
		n    *int64
		what string
		sql  string
	}{
		{&p.Sessions, "expired sessions", `DELETE FROM sessions WHERE expires_at <= $1`},
		{&p.LoginLinks, "spent login links", `DELETE FROM login_links WHERE used_at IS NOT NULL OR expires_at <= $1`},
		// webhook_message_ids_expiry
		{&p.WebhookMessageIDs, "expired webhook message ids", `DELETE FROM webhook_message_ids WHERE expires_at <= $1`},
	} {
		tag, err := db.Exec(ctx, s.sql, now)
		if err != nil {
			return p, fmt.Errorf("error deleting %s: %w", s.what, err)
		}
		*s.n = tag.RowsAffected()
	}
	return p, nil
}

// Expired counts what PruneExpired removed.
type Expired struct {
	// WebhookDeliveries: received webhook deliveries (payloads, routing
	// traces, the quarantine) received before the cut-off.
	WebhookDeliveries int64
}

// webhookDeliveriesExpiry finds one batch of old deliveries ($1 the
// cut-off, $2 the batch) through the index on their age
// (webhook_deliveries_age).
const webhookDeliveriesExpiry = `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries WHERE received_at < $1 LIMIT $2)`

// PruneExpired removes the reference host's history older than before:
// received webhook deliveries with their routing traces and the
// quarantine, in deletes of at most batch rows. Give it a pool or a
// connection outside a transaction, so each batch commits on its own; it
// stops at the first error, with the count so far, and between batches
// when ctx is done.
func PruneExpired(ctx context.Context, db DBTX, before time.Time, batch int) (Expired, error) {
	if batch <= 0 {
		panic("hoststore: pruning needs a positive batch")
	}
	var x Expired
	for {
		if err := ctx.Err(); err != nil {
			return x, fmt.Errorf("error deleting webhook deliveries: %w", err)
		}
		tag, err := db.Exec(ctx, webhookDeliveriesExpiry, before, batch)
		if err != nil {
			return x, fmt.Errorf("error deleting webhook deliveries: %w", err)
		}
		x.WebhookDeliveries += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return x, nil
		}
	}
}
