package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// Subscription is a row of subscriptions (REQ-6). Empty filters mean any.
// MinSeverityRank is 0 low, 1 normal, 2 high (D6).
type Subscription struct {
	ID                  int64
	SinkID              int64
	Owner               notifytype.OwnerScope
	EventTypes          []string
	QueueIDs            []int64
	EndpointIDs         []int64
	WebhookIDs          []int64
	MinSeverityRank     int
	IncludeExcerpt      bool
	CreatedAt           time.Time
	CreatedByHumanID    string
	CreatedByEndpointID int64
}

const subscriptionColumns = `id, sink_id, owner, event_types, queue_ids, endpoint_ids, webhook_ids,
	min_severity_rank, include_excerpt, created_at, coalesce(created_by_human_id, ''), coalesce(created_by_endpoint_id, 0)`

func scanSubscription(row pgx.Row) (Subscription, error) {
	var (
		s     Subscription
		owner string
	)
	if err := row.Scan(&s.ID, &s.SinkID, &owner, &s.EventTypes, &s.QueueIDs, &s.EndpointIDs, &s.WebhookIDs,
		&s.MinSeverityRank, &s.IncludeExcerpt, &s.CreatedAt, &s.CreatedByHumanID, &s.CreatedByEndpointID); err != nil {
		return Subscription{}, err
	}
	var err error
	if s.Owner, err = notifytype.ParseOwnerScope(owner); err != nil {
		return Subscription{}, fmt.Errorf("error reading subscription %d owner: %w", s.ID, err)
	}
	return s, nil
}

// InsertSubscription inserts a subscription; ID and CreatedAt are filled in.
// A sink deleted meanwhile is a foreign key violation, reported as
// pgx.ErrNoRows.
func InsertSubscription(ctx context.Context, db DBTX, s Subscription) (Subscription, error) {
	out, err := scanSubscription(db.QueryRow(ctx, `INSERT INTO switchboard.subscriptions (sink_id, owner, event_types,
			queue_ids, endpoint_ids, webhook_ids, min_severity_rank, include_excerpt,
			created_by_human_id, created_by_endpoint_id)
		VALUES ($1, $2, $3, coalesce($4::bigint[], '{}'), coalesce($5::bigint[], '{}'), coalesce($6::bigint[], '{}'),
			$7, $8, NULLIF($9::text, ''), NULLIF($10::bigint, 0))
		RETURNING `+subscriptionColumns,
		s.SinkID, s.Owner.String(), s.EventTypes, s.QueueIDs, s.EndpointIDs, s.WebhookIDs,
		s.MinSeverityRank, s.IncludeExcerpt, s.CreatedByHumanID, s.CreatedByEndpointID))
	if isForeignKeyViolation(err, "subscriptions_sink_id_fkey") {
		return Subscription{}, fmt.Errorf("error inserting subscription: %w", pgx.ErrNoRows)
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("error inserting subscription: %w", err)
	}
	return out, nil
}

// ListSubscriptions reads the subscriptions of one sink, oldest first.
func ListSubscriptions(ctx context.Context, db DBTX, sinkID int64) ([]Subscription, error) {
	rows, err := db.Query(ctx, `SELECT `+subscriptionColumns+` FROM switchboard.subscriptions WHERE sink_id = $1 ORDER BY id`, sinkID)
	if err != nil {
		return nil, fmt.Errorf("error listing subscriptions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) { return scanSubscription(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing subscriptions: %w", err)
	}
	return out, nil
}

// DeleteSinkSubscriptions deletes every subscription of one sink.
func DeleteSinkSubscriptions(ctx context.Context, db DBTX, sinkID int64) error {
	if _, err := db.Exec(ctx, `DELETE FROM switchboard.subscriptions WHERE sink_id = $1`, sinkID); err != nil {
		return fmt.Errorf("error deleting subscriptions: %w", err)
	}
	return nil
}

// DeleteSubscription deletes one subscription of one sink. A subscription
// missing, or of another sink, is pgx.ErrNoRows.
func DeleteSubscription(ctx context.Context, db DBTX, sinkID, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM switchboard.subscriptions WHERE id = $1 AND sink_id = $2`, id, sinkID)
	if err != nil {
		return fmt.Errorf("error deleting subscription: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("error deleting subscription: %w", pgx.ErrNoRows)
	}
	return nil
}
