package engine

import (
	"context"

	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Actions of the write log: every write of the management service records
// one, with its author, in the write's own transaction (REQ-5: every write
// records the acting endpoint and its accountable human).
const (
	writeConnectionCreate   = "connection.create"
	writeConnectionDelete   = "connection.delete"
	writeConnectionUpdate   = "connection.update"
	writeSinkCreate         = "sink.create"
	writeSinkUpdate         = "sink.update"
	writeSinkDelete         = "sink.delete"
	writeSinkTest           = "sink.test"
	writeSubscriptionsSet   = "subscriptions.replace"
	writeSubscriptionAdd    = "subscription.create"
	writeSubscriptionDelete = "subscription.delete"
)

// Object kinds of the write log.
const (
	objectConnection   = "connection"
	objectSink         = "sink"
	objectSubscription = "subscription"
)

// recordWrite records in the write log that p wrote (action) the object
// of kind and id in owner's scope: the acting human, and the endpoint when
// one acted for its accountable human. Call it with the write's own
// transaction, so the record exists exactly when the write does. A host
// records its own writes through history.RecordWrite.
func recordWrite(ctx context.Context, db store.DBTX, p Principal, owner notifytype.OwnerScope, action, objectKind string, objectID int64) error {
	return enginecore.RecordWrite(ctx, db, enginecore.Principal(p), owner, action, objectKind, objectID)
}
