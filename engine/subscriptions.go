package engine

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// SubscriptionInput is a subscription as a caller gives it (REQ-6).
type SubscriptionInput struct {
	// EventTypes are the event types the sink hears of, each declared
	// (Engine.EventKinds). At least one; repeats are dropped.
	EventTypes []notifytype.EventType

	// Queues, Endpoints and Webhooks filter events to these objects, each of
	// the sink's owner scope. Empty means any.
	Queues, Endpoints, Webhooks []int64

	// MinSeverity is the lowest severity the sink hears of. Defaults to low.
	MinSeverity notifytype.Severity

	// IncludeExcerpt lets messages carry up to 280 characters of the
	// subject's body (REQ-9). Defaults to false.
	IncludeExcerpt bool
}

// Subscription is a subscription as the service returns it.
type Subscription struct {
	ID                  int64
	SinkID              int64
	Owner               notifytype.OwnerScope
	EventTypes          []notifytype.EventType
	Queues              []int64
	Endpoints           []int64
	Webhooks            []int64
	MinSeverity         notifytype.Severity
	IncludeExcerpt      bool
	CreatedAt           time.Time
	CreatedByHumanID    string
	CreatedByEndpointID int64
}

func subscriptionOut(s store.Subscription) Subscription {
	types := make([]notifytype.EventType, len(s.EventTypes))
	for i, t := range s.EventTypes {
		types[i] = notifytype.EventType(t)
	}
	return Subscription{
		ID: s.ID, SinkID: s.SinkID, Owner: s.Owner, EventTypes: types,
		Queues: s.QueueIDs, Endpoints: s.EndpointIDs, Webhooks: s.WebhookIDs,
		MinSeverity: notifytype.Severities[s.MinSeverityRank], IncludeExcerpt: s.IncludeExcerpt,
		CreatedAt: s.CreatedAt, CreatedByHumanID: s.CreatedByHumanID, CreatedByEndpointID: s.CreatedByEndpointID,
	}
}

// SetSubscriptions replaces all of a sink's subscriptions with ins (none
// clears them). It is all or nothing: one invalid input stores nothing, and
// its refusal is an *ItemError saying which input it was.
func (e *Engine) SetSubscriptions(ctx context.Context, p Principal, sinkID int64, ins []SubscriptionInput) ([]Subscription, error) {
	out, err := e.writeSubscriptions(ctx, p, sinkID, ins, true)
	return out, wrapErr(err, "setting subscriptions")
}

// AddSubscription adds one subscription to a sink.
func (e *Engine) AddSubscription(ctx context.Context, p Principal, sinkID int64, in SubscriptionInput) (Subscription, error) {
	out, err := e.writeSubscriptions(ctx, p, sinkID, []SubscriptionInput{in}, false)
	if err != nil {
		return Subscription{}, wrapErr(err, "adding subscription")
	}
	return out[0], nil
}

func (e *Engine) writeSubscriptions(ctx context.Context, p Principal, sinkID int64, ins []SubscriptionInput, replace bool) ([]Subscription, error) {
	sink, err := e.readSink(ctx, p, sinkID, true)
	if err != nil {
		return nil, err
	}
	// The host is asked before the transaction starts: a Directory may use
	// the same pool, and a transaction waiting on it could starve it.
	rows := make([]store.Subscription, len(ins))
	for i, in := range ins {
		if rows[i], err = e.checkSubscription(ctx, sink.Owner, in); err != nil {
			if coded, ok := notifytype.AsError(err); ok && replace {
				return nil, &ItemError{Index: i, Err: coded}
			}
			return nil, err
		}
		rows[i].SinkID, rows[i].Owner = sink.ID, sink.Owner
		rows[i].CreatedByHumanID, rows[i].CreatedByEndpointID = p.HumanID, p.EndpointID
	}
	out := make([]Subscription, 0, len(rows))
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		// The sink's row lock orders concurrent writers of its
		// subscriptions, and finds a sink deleted meanwhile.
		if _, err := store.GetSinkForUpdate(ctx, tx, sinkID); err != nil {
			return notFoundIfNoRows(err, "sink")
		}
		if replace {
			if err := store.DeleteSinkSubscriptions(ctx, tx, sinkID); err != nil {
				return err
			}
			// The replacement is one write of the sink's subscriptions.
			if err := recordWrite(ctx, tx, p, sink.Owner, writeSubscriptionsSet, objectSink, sinkID); err != nil {
				return err
			}
		}
		for _, r := range rows {
			s, err := store.InsertSubscription(ctx, tx, r)
			if err != nil {
				return notFoundIfNoRows(err, "sink")
			}
			out = append(out, subscriptionOut(s))
			if err := recordWrite(ctx, tx, p, sink.Owner, writeSubscriptionAdd, objectSubscription, s.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkSubscription validates one input for a sink of owner: event types,
// severity, and filters that name only objects of owner. A filter naming an
// id of another scope is refused exactly as one naming no object at all, so
// it reveals nothing of the other scope.
func (e *Engine) checkSubscription(ctx context.Context, owner notifytype.OwnerScope, in SubscriptionInput) (store.Subscription, error) {
	if len(in.EventTypes) == 0 {
		return store.Subscription{}, notifytype.InvalidArgument("event_types", "name at least one event type")
	}
	var s store.Subscription
	for _, t := range in.EventTypes {
		if _, ok := e.kinds.byType[t]; !ok {
			return store.Subscription{}, notifytype.InvalidArgumentf("event_types", "unknown event type %q", t)
		}
		if !slices.Contains(s.EventTypes, string(t)) {
			s.EventTypes = append(s.EventTypes, string(t))
		}
	}
	sev, err := notifytype.ParseSeverity("min_severity", string(in.MinSeverity), notifytype.SeverityLow)
	if err != nil {
		return store.Subscription{}, err
	}
	s.MinSeverityRank, s.IncludeExcerpt = sev.Rank(), in.IncludeExcerpt
	for _, f := range []struct {
		field string
		kind  Resource
		ids   []int64
		dst   *[]int64
	}{
		{"queues", ResourceQueue, in.Queues, &s.QueueIDs},
		{"endpoints", ResourceEndpoint, in.Endpoints, &s.EndpointIDs},
		{"webhooks", ResourceWebhook, in.Webhooks, &s.WebhookIDs},
	} {
		if *f.dst, err = e.ownedFilter(ctx, owner, f.field, f.kind, f.ids); err != nil {
			return store.Subscription{}, err
		}
	}
	return s, nil
}

// ownedFilter returns ids sorted without repeats, refusing field unless the
// Directory says every one is an object of kind in owner.
func (e *Engine) ownedFilter(ctx context.Context, owner notifytype.OwnerScope, field string, kind Resource, ids []int64) ([]int64, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return []int64{}, nil
	}
	refuse := notifytype.InvalidArgumentf(field, "every id must name a %s of the sink's owner scope", kind)
	if ids[0] <= 0 {
		return nil, refuse
	}
	owned, err := e.cfg.Directory.Owned(ctx, owner, kind, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.Contains(owned, id) {
			return nil, refuse
		}
	}
	return ids, nil
}

// ListSubscriptions lists a sink's subscriptions, oldest first.
func (e *Engine) ListSubscriptions(ctx context.Context, p Principal, sinkID int64) ([]Subscription, error) {
	if _, err := e.readSink(ctx, p, sinkID, false); err != nil {
		return nil, wrapErr(err, "listing subscriptions")
	}
	rows, err := store.ListSubscriptions(ctx, e.cfg.Pool, sinkID)
	if err != nil {
		return nil, wrapErr(err, "listing subscriptions")
	}
	out := make([]Subscription, len(rows))
	for i, r := range rows {
		out[i] = subscriptionOut(r)
	}
	return out, nil
}

// DeleteSubscription deletes one subscription of a sink; a subscription of
// another sink is not_found.
func (e *Engine) DeleteSubscription(ctx context.Context, p Principal, sinkID, subID int64) error {
	sink, err := e.readSink(ctx, p, sinkID, true)
	if err != nil {
		return wrapErr(err, "deleting subscription")
	}
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		if err := store.DeleteSubscription(ctx, tx, sinkID, subID); err != nil {
			return notFoundIfNoRows(err, "subscription")
		}
		return recordWrite(ctx, tx, p, sink.Owner, writeSubscriptionDelete, objectSubscription, subID)
	})
	return wrapErr(err, "deleting subscription")
}
