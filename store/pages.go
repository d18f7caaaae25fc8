package store

import (
	"context"
	"fmt"
	"time"
)

// CountTestsSince counts a sink's test messages sent at or after since,
// and returns the first of them (zero when none).
func CountTestsSince(ctx context.Context, db DBTX, sinkID int64, since time.Time) (int, time.Time, error) {
	var n int
	var first *time.Time
	err := db.QueryRow(ctx, `SELECT count(*), min(sent_at) FROM switchboard.delivery_records WHERE sink_id = $1 AND is_test AND sent_at >= $2`,
		sinkID, since).Scan(&n, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("error counting test messages: %w", err)
	}
	if first == nil {
		return n, time.Time{}, nil
	}
	return n, *first, nil
}

// RecordAgentPage counts one notify_owner call of an endpoint, unless it
// already made limit calls at or after since; it reports whether it
// counted, and when it did not, the first of those calls (the next is
// allowed when that one leaves the window). tx must be a transaction: it
// takes a transaction-scoped advisory lock on the endpoint in the engine's
// own family (LockFamilyAgentPage), so concurrent calls count one
// at a time across instances, and the count is read after the lock (a
// statement of its own, whose snapshot sees the pages committed while it
// waited). Nothing outside schema switchboard is read or locked: an
// embedder's endpoints need no table of any name.
func RecordAgentPage(ctx context.Context, tx DBTX, endpointID int64, now, since time.Time, limit int) (bool, time.Time, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2::bigint::text))`, LockFamilyAgentPage, endpointID); err != nil {
		return false, time.Time{}, fmt.Errorf("error locking endpoint's page count: %w", err)
	}
	var n int
	var first *time.Time
	if err := tx.QueryRow(ctx, `SELECT count(*), min(paged_at) FROM switchboard.agent_pages WHERE endpoint_id = $1 AND paged_at >= $2`,
		endpointID, since).Scan(&n, &first); err != nil {
		return false, time.Time{}, fmt.Errorf("error counting agent pages: %w", err)
	}
	if n >= limit {
		var at time.Time
		if first != nil {
			at = *first
		}
		return false, at, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO switchboard.agent_pages (endpoint_id, paged_at) VALUES ($1, $2)`, endpointID, now); err != nil {
		return false, time.Time{}, fmt.Errorf("error recording agent page: %w", err)
	}
	return true, time.Time{}, nil
}

// ListDeliveryRecords returns a sink's latest delivery records, newest
// first.
func ListDeliveryRecords(ctx context.Context, db DBTX, sinkID int64, limit int) ([]DeliveryRecord, error) {
	rows, err := db.Query(ctx, `
		SELECT id, sink_id, owner, coalesce(outbox_id, 0), event_type, attempt, is_test, counts_budget,
		       coalesced_rows, status, coalesce(class, ''), coalesce(http_status, 0), sent_at, finished_at
		FROM switchboard.delivery_records WHERE sink_id = $1 ORDER BY id DESC LIMIT $2`, sinkID, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing delivery records: %w", err)
	}
	defer rows.Close()
	var out []DeliveryRecord
	for rows.Next() {
		var r DeliveryRecord
		if err := rows.Scan(&r.ID, &r.SinkID, &r.Owner, &r.OutboxID, &r.EventType, &r.Attempt, &r.IsTest, &r.CountsBudget,
			&r.CoalescedRows, &r.Status, &r.Class, &r.HTTPStatus, &r.SentAt, &r.FinishedAt); err != nil {
			return nil, fmt.Errorf("error reading delivery record: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error listing delivery records: %w", err)
	}
	return out, nil
}
