package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NotificationRow is one outbox row (a notification to one sink) as the
// board lists it: its content's public parts, never its excerpt.
type NotificationRow struct {
	ID        int64
	SinkID    int64
	SinkName  string // "" when the sink is gone
	Owner     string
	EventType string
	Severity  string
	State     string
	Count     int
	Attempts  int
	LastClass string
	Title     string
	Place     string
	Summary   string
	LinkPath  string
	CreatedAt time.Time
	DueAt     time.Time
}

// RecentNotifications returns the latest outbox rows of the owners, newest
// first; linkPath, when not empty, keeps only the rows whose board link is
// that path (a todo's page lists its own notifications).
func RecentNotifications(ctx context.Context, db DBTX, owners []string, linkPath string, limit int) ([]NotificationRow, error) {
	rows, err := db.Query(ctx, `SELECT o.id, o.sink_id, coalesce(s.name, ''), o.owner, o.event_type, o.severity, o.state,
			o.count, o.attempts, coalesce(o.last_class, ''),
			coalesce(o.payload->>'title', ''), coalesce(o.payload->>'place', ''), coalesce(o.payload->>'summary', ''),
			coalesce(o.payload->>'link_path', ''), o.created_at, o.due_at
		FROM switchboard.outbox o LEFT JOIN switchboard.sinks s ON s.id = o.sink_id
		WHERE o.owner = ANY($1) AND ($2 = '' OR o.payload->>'link_path' = $2)
		ORDER BY o.id DESC LIMIT $3`, owners, linkPath, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NotificationRow, error) {
		var n NotificationRow
		err := r.Scan(&n.ID, &n.SinkID, &n.SinkName, &n.Owner, &n.EventType, &n.Severity, &n.State,
			&n.Count, &n.Attempts, &n.LastClass, &n.Title, &n.Place, &n.Summary, &n.LinkPath, &n.CreatedAt, &n.DueAt)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing notifications: %w", err)
	}
	return out, nil
}

// DeliveryRecordsOf returns the delivery records of the outbox rows, oldest
// first.
func DeliveryRecordsOf(ctx context.Context, db DBTX, outboxIDs []int64) ([]DeliveryRecord, error) {
	if len(outboxIDs) == 0 {
		return nil, nil
	}
	return queryDeliveryRecords(ctx, db, `WHERE outbox_id = ANY($1) ORDER BY id`, outboxIDs)
}

// LastDeliveryRecords returns the newest delivery record of each sink, one
// at most per sink.
func LastDeliveryRecords(ctx context.Context, db DBTX, sinkIDs []int64) ([]DeliveryRecord, error) {
	if len(sinkIDs) == 0 {
		return nil, nil
	}
	return queryDeliveryRecords(ctx, db, `WHERE id IN (SELECT (SELECT d.id FROM switchboard.delivery_records d WHERE d.sink_id = s
		ORDER BY d.id DESC LIMIT 1) FROM unnest($1::bigint[]) s) ORDER BY sink_id`, sinkIDs)
}

func queryDeliveryRecords(ctx context.Context, db DBTX, where string, args ...any) ([]DeliveryRecord, error) {
	rows, err := db.Query(ctx, `
		SELECT id, sink_id, owner, coalesce(outbox_id, 0), event_type, attempt, is_test, counts_budget,
		       coalesced_rows, status, coalesce(class, ''), coalesce(http_status, 0), sent_at, finished_at
		FROM switchboard.delivery_records `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("error listing delivery records: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeliveryRecord, error) {
		var d DeliveryRecord
		err := r.Scan(&d.ID, &d.SinkID, &d.Owner, &d.OutboxID, &d.EventType, &d.Attempt, &d.IsTest, &d.CountsBudget,
			&d.CoalescedRows, &d.Status, &d.Class, &d.HTTPStatus, &d.SentAt, &d.FinishedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing delivery records: %w", err)
	}
	return out, nil
}

// RecentNotificationEvents returns the outbox rows of the latest events of
// the owners, one group per event, newest event first and its rows by
// sink (issue 25: one event, one entry). The rows one event makes are
// written by one statement, so they share their owner, event type, board
// link and creation time: that is the event's key. At most limit events;
// the grouping reads only the newest limit*EventRowsPerEvent rows, so it
// costs what a page of rows costs however long the history is.
func RecentNotificationEvents(ctx context.Context, db DBTX, owners []string, linkPath string, limit int) ([][]NotificationRow, error) {
	rows, err := db.Query(ctx, `WITH recent AS (
			SELECT o.id, o.owner, o.event_type, coalesce(o.payload->>'link_path', '') AS link_path, o.created_at
			FROM switchboard.outbox o
			WHERE o.owner = ANY($1) AND ($2 = '' OR o.payload->>'link_path' = $2)
			ORDER BY o.id DESC LIMIT $3 * $4::int
		), events AS (
			SELECT owner, event_type, link_path, created_at, max(id) AS newest
			FROM recent GROUP BY owner, event_type, link_path, created_at
			ORDER BY newest DESC LIMIT $3
		)
		SELECT e.newest, o.id, o.sink_id, coalesce(s.name, ''), o.owner, o.event_type, o.severity, o.state,
			o.count, o.attempts, coalesce(o.last_class, ''),
			coalesce(o.payload->>'title', ''), coalesce(o.payload->>'place', ''), coalesce(o.payload->>'summary', ''),
			coalesce(o.payload->>'link_path', ''), o.created_at, o.due_at
		FROM events e
		JOIN recent r ON (r.owner, r.event_type, r.link_path, r.created_at) = (e.owner, e.event_type, e.link_path, e.created_at)
		JOIN switchboard.outbox o ON o.id = r.id
		LEFT JOIN switchboard.sinks s ON s.id = o.sink_id
		ORDER BY e.newest DESC, coalesce(s.name, ''), o.id`, owners, linkPath, limit, EventRowsPerEvent)
	if err != nil {
		return nil, fmt.Errorf("error listing notifications: %w", err)
	}
	type keyed struct {
		newest int64
		row    NotificationRow
	}
	flat, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyed, error) {
		var k keyed
		n := &k.row
		err := r.Scan(&k.newest, &n.ID, &n.SinkID, &n.SinkName, &n.Owner, &n.EventType, &n.Severity, &n.State,
			&n.Count, &n.Attempts, &n.LastClass, &n.Title, &n.Place, &n.Summary, &n.LinkPath, &n.CreatedAt, &n.DueAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing notifications: %w", err)
	}
	var out [][]NotificationRow
	for i, k := range flat {
		if i == 0 || flat[i-1].newest != k.newest {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], k.row)
	}
	return out, nil
}

// EventRowsPerEvent is how many outbox rows per listed event the
// notifications page reads at most to find its events: one per sink, and
// a scope has at most 10 sinks by default.
const EventRowsPerEvent = 10
