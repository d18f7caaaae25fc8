package engine

import (
	"context"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// Actions of the write log: every write of the management service records
// one, with its author, in the write's own transaction (REQ-5: every write
// records the acting endpoint and its accountable human).
const (
	WriteConnectionCreate   = "connection.create"
	WriteConnectionDelete   = "connection.delete"
	WriteSinkCreate         = "sink.create"
	WriteSinkUpdate         = "sink.update"
	WriteSinkDelete         = "sink.delete"
	WriteSinkTest           = "sink.test"
	WriteSubscriptionsSet   = "subscriptions.replace"
	WriteSubscriptionAdd    = "subscription.create"
	WriteSubscriptionDelete = "subscription.delete"
	WriteAgentPage          = "agent.notify"
	WriteDigestCreate       = "digest.create"
	WriteDigestUpdate       = "digest.update"
	WriteDigestDelete       = "digest.delete"
	WriteDigestSend         = "digest.send"
)

// Object kinds of the write log.
const (
	ObjectConnection   = "connection"
	ObjectSink         = "sink"
	ObjectSubscription = "subscription"
	ObjectEndpoint     = "endpoint"
	ObjectDigest       = "digest"
)

// RecordWrite records in the write log that p wrote (action) the object
// of kind and id in owner's scope: the acting human, and the endpoint when
// one acted for its accountable human. Call it with the write's own
// transaction, so the record exists exactly when the write does. The
// engine records its own writes (digests among them); a host records its
// writes (endpoints, webhooks) through it too.
func RecordWrite(ctx context.Context, db store.DBTX, p Principal, owner notifytype.OwnerScope, action, objectKind string, objectID int64) error {
	return store.InsertWrite(ctx, db, store.Write{
		Owner: owner.String(), Action: action, ObjectKind: objectKind, ObjectID: objectID,
		HumanID: p.HumanID, EndpointID: p.EndpointID,
	})
}
