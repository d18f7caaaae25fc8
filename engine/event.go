package engine

import (
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// Event is something an owner may want to hear about, as its source tells
// it to Emit. Type and Owner are required; OccurrenceKey or Subject as the
// type's dedup rule asks (EventKind.Dedup).
type Event struct {
	// Type is the event type, one declared in Config.Events (or one of the
	// engine's own). Required.
	Type notifytype.EventType

	// Owner is the one owner scope the event belongs to (REQ-7): a todo's
	// owner, the webhook's owner, the digest's. Only that scope's sinks
	// hear of it. Required.
	Owner notifytype.OwnerScope

	// Severity defaults to the type's declared severity (REQ-6).
	Severity notifytype.Severity

	// QueueID, EndpointID and WebhookID are what subscription filters match
	// on (a subscription may name queues, endpoints and webhooks, REQ-6);
	// zero when the event has none.
	QueueID, EndpointID, WebhookID int64

	// OccurrenceKey names the occurrence an event reports, for a type
	// deduplicated by occurrence (DedupOccurrence): emits with the same key
	// are one notification ("12:1" for the first dead letter of job 12).
	// Required for those types, ignored for the others.
	OccurrenceKey string

	// Subject names what an event is about, for a type deduplicated by
	// subject (DedupSubject): repeats on the same subject while its row
	// waits add to its count. Required for those types, ignored for the
	// others.
	Subject string

	// Content is what the message will say: the type's Message words it at
	// delivery. Body is the subject's body, the source of the opt-in
	// excerpt.
	Content sinks.Content
}
