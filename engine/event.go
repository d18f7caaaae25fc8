package engine

import (
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// Event is something an owner may want to hear about, as its source tells
// it to Emit. Type and Owner are required; the rest depends on the type.
type Event struct {
	// Type is the event type. Required.
	Type notifytype.EventType

	// Owner is the one owner scope the event belongs to (REQ-7): a todo's
	// owner, the webhook's owner, the digest's. Only that scope's sinks
	// hear of it. Required.
	Owner notifytype.OwnerScope

	// Severity defaults to the type's default severity (REQ-6).
	Severity notifytype.Severity

	// QueueID, EndpointID and WebhookID are what subscription filters match
	// on; zero when the event has none.
	QueueID, EndpointID, WebhookID int64

	// TodoID and DeadLetterCount make the dedup key of todo.dead_lettered
	// and relay.exhausted (D7): required for those types.
	TodoID          int64
	DeadLetterCount int

	// RuleID with SubjectKey (or EventID when there is no subject) make the
	// dedup key of rule.notify (D7).
	RuleID     int64
	SubjectKey string
	EventID    int64

	// Content is what the message will say; it is rendered at delivery.
	Content sinks.Content
}
