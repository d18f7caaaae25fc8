// Package history is the reference product's record of what happened:
// the notifications each sink got and their delivery attempts, as the
// board lists them (RecentNotifications, RecentNotificationEvents,
// LastDeliveries), and the write log (who changed what, REQ-5), to which a
// host adds its own writes beside the engine's (RecordWrite).
package history

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/notifytype"
)

// RecordWrite records in the write log that p wrote (action) the object
// of kind and id in owner's scope: the acting human, and the endpoint when
// one acted for its accountable human. Call it with the write's own
// transaction tx, so the record exists exactly when the write does. The
// engine records its own writes (sinks, connections, subscriptions,
// digests); a host records its writes (the reference host's endpoints and
// webhooks) through it. The janitor removes records older than
// Config.Retention.
func RecordWrite(ctx context.Context, tx pgx.Tx, p engine.Principal, owner notifytype.OwnerScope, action, objectKind string, objectID int64) error {
	return enginecore.RecordWrite(ctx, tx, enginecore.Principal(p), owner, action, objectKind, objectID)
}
