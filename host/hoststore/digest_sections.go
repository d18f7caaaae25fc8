package hoststore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// The reference host's digest section queries (REQ-13). Each reads only
// the owner scope's own todos of the given queues, through the partial
// indexes of migration 0009 (todos_digest_*), never by scanning every
// todo; ages and lease comparisons are on the database's clock.

// QueueName is a queue's id and name.
type QueueName struct {
	ID   int64
	Name string
}

// QueuesOf lists an owner scope's queues, by name.
func QueuesOf(ctx context.Context, db DBTX, owner notifytype.OwnerScope) ([]QueueName, error) {
	rows, err := db.Query(ctx, `SELECT id, name FROM queues WHERE owner = $1 ORDER BY name, id`, owner.String())
	if err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueName])
	if err != nil {
		return nil, fmt.Errorf("error listing queues: %w", err)
	}
	return out, nil
}

// QueuePending is a queue's pending count and its oldest pending age.
type QueuePending struct {
	QueueID   int64
	Count     int
	OldestAge time.Duration
}

// PendingSQL counts pending todos per queue (index todos_digest_pending).
const PendingSQL = `
SELECT queue_id, count(*), greatest(now() - min(created_at), interval '0')
FROM todos WHERE state = 'pending' AND queue_id = ANY ($2) AND owner = $1
GROUP BY queue_id`

// PendingByQueue counts each queue's pending todos.
func PendingByQueue(ctx context.Context, db DBTX, owner notifytype.OwnerScope, queueIDs []int64) ([]QueuePending, error) {
	rows, err := db.Query(ctx, PendingSQL, owner.String(), ids(queueIDs))
	if err != nil {
		return nil, fmt.Errorf("error counting pending todos: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueuePending])
	if err != nil {
		return nil, fmt.Errorf("error counting pending todos: %w", err)
	}
	return out, nil
}

// ClaimedSQL counts claimed todos per queue, and of them the stalled ones:
// lease expired and not yet reaped, or no heartbeat (since the claim) for
// more than twice the lease TTL (index todos_digest_claimed).
const ClaimedSQL = `
SELECT queue_id, count(*),
       count(*) FILTER (WHERE lease_expires_at < now()
                           OR coalesce(last_heartbeat_at, updated_at) < now() - 2 * lease_ttl_secs * interval '1 second')
FROM todos WHERE state = 'claimed' AND queue_id = ANY ($2) AND owner = $1
GROUP BY queue_id`

// QueueClaimed is a queue's claimed and stalled counts.
type QueueClaimed struct {
	QueueID int64
	Claimed int
	Stalled int
}

// ClaimedByQueue counts each queue's claimed and stalled todos.
func ClaimedByQueue(ctx context.Context, db DBTX, owner notifytype.OwnerScope, queueIDs []int64) ([]QueueClaimed, error) {
	rows, err := db.Query(ctx, ClaimedSQL, owner.String(), ids(queueIDs))
	if err != nil {
		return nil, fmt.Errorf("error counting claimed todos: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueClaimed])
	if err != nil {
		return nil, fmt.Errorf("error counting claimed todos: %w", err)
	}
	return out, nil
}

// DeadLettersSQL counts the todos dead since $3 per queue and lists up to
// $4 of each, newest first (index todos_digest_dead).
const DeadLettersSQL = `
SELECT q.id, c.n, coalesce(t.ids, '{}'), coalesce(t.titles, '{}')
FROM unnest($2::bigint[]) AS q(id)
CROSS JOIN LATERAL (SELECT count(*) AS n FROM todos
                    WHERE state = 'dead' AND queue_id = q.id AND updated_at >= $3 AND owner = $1) c
CROSS JOIN LATERAL (SELECT array_agg(id ORDER BY updated_at DESC, id DESC) AS ids,
                           array_agg(title ORDER BY updated_at DESC, id DESC) AS titles
                    FROM (SELECT id, title, updated_at FROM todos
                          WHERE state = 'dead' AND queue_id = q.id AND updated_at >= $3 AND owner = $1
                          ORDER BY updated_at DESC, id DESC LIMIT $4) r) t
WHERE c.n > 0`

// QueueDeadLetters is a queue's dead letters since a time.
type QueueDeadLetters struct {
	QueueID int64
	Count   int
	IDs     []int64
	Titles  []string
}

// DeadLettersByQueue counts each queue's dead letters since since, with up
// to limit of them.
func DeadLettersByQueue(ctx context.Context, db DBTX, owner notifytype.OwnerScope, queueIDs []int64, since time.Time, limit int) ([]QueueDeadLetters, error) {
	rows, err := db.Query(ctx, DeadLettersSQL, owner.String(), ids(queueIDs), since, limit)
	if err != nil {
		return nil, fmt.Errorf("error counting dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueueDeadLetters])
	if err != nil {
		return nil, fmt.Errorf("error counting dead letters: %w", err)
	}
	return out, nil
}

// QuarantinedSQL counts the owner scope's deliveries quarantined since $2,
// per webhook (SPEC-0026 stand-in: webhook_deliveries with outcome
// quarantined; index webhook_deliveries_quarantined of migration 0009). A
// webhook deleted since is counted as "deleted webhook <id>": its
// deliveries stay until retention, and were quarantined all the same.
const QuarantinedSQL = `
SELECT coalesce(w.name, 'deleted webhook ' || d.webhook_id), count(*)::int
FROM webhook_deliveries d LEFT JOIN webhooks w ON w.id = d.webhook_id
WHERE d.owner = $1 AND d.outcome = 'quarantined' AND d.received_at >= $2
GROUP BY 1 ORDER BY 1`

// WebhookCount is a count for a webhook, by name.
type WebhookCount struct {
	Name  string
	Count int
}

// QuarantinedByWebhook counts the owner scope's quarantined deliveries
// since since, per webhook.
func QuarantinedByWebhook(ctx context.Context, db DBTX, owner notifytype.OwnerScope, since time.Time) ([]WebhookCount, error) {
	rows, err := db.Query(ctx, QuarantinedSQL, owner.String(), since)
	if err != nil {
		return nil, fmt.Errorf("error counting quarantined deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[WebhookCount])
	if err != nil {
		return nil, fmt.Errorf("error counting quarantined deliveries: %w", err)
	}
	return out, nil
}
