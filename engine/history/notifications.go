package history

import (
	"cmp"
	"context"
	"time"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// NotificationsShownMax bounds how many notifications RecentNotifications
// returns.
const NotificationsShownMax = 200

// Notification is one notification to one sink (an outbox row) as the
// board shows it: what it says in public (never the excerpt), where it
// went, and each delivery attempt.
type Notification struct {
	ID        int64                 `json:"id"`
	SinkID    int64                 `json:"sink_id"`
	SinkName  string                `json:"sink_name"` // "" once the sink is deleted
	Owner     notifytype.OwnerScope `json:"owner"`
	EventType notifytype.EventType  `json:"event_type"`
	Severity  notifytype.Severity   `json:"severity"`
	// State is pending, held, claimed, delivered, partial or undeliverable.
	State     string                `json:"state"`
	Count     int                   `json:"count"`
	Attempts  int                   `json:"attempts"`
	LastClass notifytype.ErrorClass `json:"last_class,omitempty"`
	// Title is the item's title (sender- or agent-written); Place the
	// queue or webhook; LinkPath the item's board path.
	Title      string                  `json:"title"`
	Place      string                  `json:"place"`
	Summary    string                  `json:"summary"`
	LinkPath   string                  `json:"link_path"`
	CreatedAt  time.Time               `json:"created_at"`
	DueAt      time.Time               `json:"due_at"`
	Deliveries []engine.DeliveryRecord `json:"deliveries"`
}

// RecentNotifications returns, through e, the latest notifications of the scopes (each
// must be readable by p, else not_found), newest first, at most limit
// (1..NotificationsShownMax; default 50), each with its delivery records.
// A linkPath keeps only the notifications about that board item
// ("/board/todos/12").
func RecentNotifications(ctx context.Context, e *engine.Engine, p engine.Principal, scopes []notifytype.OwnerScope, linkPath string, limit int) ([]Notification, error) {
	core := enginecore.Of(e)
	owners, limit, err := notificationScopes(ctx, core, p, scopes, limit)
	if err != nil {
		return nil, err
	}
	rows, err := store.RecentNotifications(ctx, core.Pool, owners, linkPath, limit)
	if err != nil {
		return nil, enginecore.WrapErr(err, "listing notifications")
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	records, err := store.DeliveryRecordsOf(ctx, core.Pool, ids)
	if err != nil {
		return nil, enginecore.WrapErr(err, "listing notifications")
	}
	byRow := map[int64][]engine.DeliveryRecord{}
	for _, d := range records {
		byRow[d.OutboxID] = append(byRow[d.OutboxID], deliveryOut(d))
	}
	out := make([]Notification, 0, len(rows))
	for _, r := range rows {
		owner, err := notifytype.ParseOwnerScope(r.Owner)
		if err != nil {
			return nil, enginecore.WrapErr(err, "listing notifications")
		}
		out = append(out, Notification{
			ID: r.ID, SinkID: r.SinkID, SinkName: r.SinkName, Owner: owner,
			EventType: notifytype.EventType(r.EventType), Severity: notifytype.Severity(r.Severity),
			State: r.State, Count: r.Count, Attempts: r.Attempts, LastClass: notifytype.ErrorClass(r.LastClass),
			Title: r.Title, Place: r.Place, Summary: r.Summary, LinkPath: r.LinkPath,
			CreatedAt: r.CreatedAt, DueAt: r.DueAt, Deliveries: byRow[r.ID],
		})
	}
	return out, nil
}

// LastDeliveries returns, for each sink of scope that has one, its newest
// delivery record, keyed by sink id: the sinks' last delivery state from
// the database, whether or not an actor runs for them.
func LastDeliveries(ctx context.Context, e *engine.Engine, p engine.Principal, scope notifytype.OwnerScope) (map[int64]engine.DeliveryRecord, error) {
	core := enginecore.Of(e)
	if err := core.Authorize(ctx, enginecore.Principal(p), scope, false); err != nil {
		return nil, enginecore.WrapErr(err, "reading last deliveries")
	}
	sinkRows, err := store.ListSinks(ctx, core.Pool, scope)
	if err != nil {
		return nil, enginecore.WrapErr(err, "reading last deliveries")
	}
	ids := make([]int64, len(sinkRows))
	for i, s := range sinkRows {
		ids[i] = s.ID
	}
	records, err := store.LastDeliveryRecords(ctx, core.Pool, ids)
	if err != nil {
		return nil, enginecore.WrapErr(err, "reading last deliveries")
	}
	out := make(map[int64]engine.DeliveryRecord, len(records))
	for _, d := range records {
		out[d.SinkID] = deliveryOut(d)
	}
	return out, nil
}

func deliveryOut(r store.DeliveryRecord) engine.DeliveryRecord {
	return engine.DeliveryRecord{
		ID: r.ID, SinkID: r.SinkID, EventType: r.EventType, Attempt: r.Attempt, Test: r.IsTest,
		CoalescedRows: r.CoalescedRows, Status: r.Status, Class: notifytype.ErrorClass(r.Class),
		HTTPStatus: r.HTTPStatus, SentAt: r.SentAt,
	}
}

// NotificationEvent is one event as the board lists it (issue 25): what
// it was about, once, and the notification each sink got, with its state.
// Title is the item's title while any of its rows keeps one; a finished
// row keeps none (REQ-1), so a host may fill it from the item its link
// names (the reference host's web UI does).
type NotificationEvent struct {
	EventType notifytype.EventType  `json:"event_type"`
	Owner     notifytype.OwnerScope `json:"owner"`
	Title     string                `json:"title"`
	Place     string                `json:"place"`
	Summary   string                `json:"summary"`
	LinkPath  string                `json:"link_path"`
	CreatedAt time.Time             `json:"created_at"`
	// Sinks are the event's notifications, one per sink, by sink name.
	Sinks []Notification `json:"sinks"`
}

// RecentNotificationEvents is RecentNotifications grouped by event: the
// latest limit events of the scopes, newest first, each with the
// notification of every sink it went to.
func RecentNotificationEvents(ctx context.Context, e *engine.Engine, p engine.Principal, scopes []notifytype.OwnerScope, linkPath string, limit int) ([]NotificationEvent, error) {
	core := enginecore.Of(e)
	owners, limit, err := notificationScopes(ctx, core, p, scopes, limit)
	if err != nil {
		return nil, err
	}
	groups, err := store.RecentNotificationEvents(ctx, core.Pool, owners, linkPath, limit)
	if err != nil {
		return nil, enginecore.WrapErr(err, "listing notifications")
	}
	var ids []int64
	for _, g := range groups {
		for _, r := range g {
			ids = append(ids, r.ID)
		}
	}
	records, err := store.DeliveryRecordsOf(ctx, core.Pool, ids)
	if err != nil {
		return nil, enginecore.WrapErr(err, "listing notifications")
	}
	byRow := map[int64][]engine.DeliveryRecord{}
	for _, d := range records {
		byRow[d.OutboxID] = append(byRow[d.OutboxID], deliveryOut(d))
	}
	out := make([]NotificationEvent, 0, len(groups))
	for _, g := range groups {
		owner, err := notifytype.ParseOwnerScope(g[0].Owner)
		if err != nil {
			return nil, enginecore.WrapErr(err, "listing notifications")
		}
		ev := NotificationEvent{
			EventType: notifytype.EventType(g[0].EventType), Owner: owner,
			LinkPath: g[0].LinkPath, CreatedAt: g[0].CreatedAt,
		}
		for _, r := range g {
			ev.Title = cmp.Or(ev.Title, r.Title)
			ev.Place = cmp.Or(ev.Place, r.Place)
			ev.Summary = cmp.Or(ev.Summary, r.Summary)
			ev.Sinks = append(ev.Sinks, Notification{
				ID: r.ID, SinkID: r.SinkID, SinkName: r.SinkName, Owner: owner,
				EventType: ev.EventType, Severity: notifytype.Severity(r.Severity),
				State: r.State, Count: r.Count, Attempts: r.Attempts, LastClass: notifytype.ErrorClass(r.LastClass),
				Title: r.Title, Place: r.Place, Summary: r.Summary, LinkPath: r.LinkPath,
				CreatedAt: r.CreatedAt, DueAt: r.DueAt, Deliveries: byRow[r.ID],
			})
		}
		out = append(out, ev)
	}
	return out, nil
}

// notificationScopes checks that p may read every scope and clamps limit
// (1..NotificationsShownMax; default 50): what both notification lists ask.
func notificationScopes(ctx context.Context, core *enginecore.Core, p engine.Principal, scopes []notifytype.OwnerScope, limit int) ([]string, int, error) {
	owners := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		if err := core.Authorize(ctx, enginecore.Principal(p), sc, false); err != nil {
			return nil, 0, enginecore.WrapErr(err, "listing notifications")
		}
		owners = append(owners, sc.String())
	}
	if limit <= 0 || limit > NotificationsShownMax {
		limit = 50
	}
	return owners, limit, nil
}
