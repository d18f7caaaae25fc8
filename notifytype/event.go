package notifytype

import (
	"fmt"
	"slices"
)

// EventType names what happened (REQ-6): "job.failed". Which types exist
// is the embedder's to declare (engine.EventKind, engine.Config.Events);
// a name is a lower-case letter, then lower-case letters, digits, '.', '_'
// or '-', at most 64 in all (Valid).
type EventType string

// The reference host's event types (REQ-6's table). The host declares the
// first four (host.Events); the engine declares digest and agent.notify,
// which its feature packages emit (engine/digests, and engine/pages's
// NotifyOwner). An embedder need not use any of them.
const (
	EventTodoDeadLettered    EventType = "todo.dead_lettered"
	EventRelayExhausted      EventType = "relay.exhausted"
	EventDeliveryQuarantined EventType = "delivery.quarantined"
	EventRuleNotify          EventType = "rule.notify"
	EventAgentNotify         EventType = "agent.notify"
	EventDigest              EventType = "digest"
)

// EventTypes lists the reference host's event types in the spec's order.
var EventTypes = []EventType{
	EventTodoDeadLettered, EventRelayExhausted, EventDeliveryQuarantined,
	EventRuleNotify, EventAgentNotify, EventDigest,
}

// Valid reports whether t is a well-formed event type name: a lower-case
// letter, then lower-case letters, digits, '.', '_' or '-', at most 64 in
// all. Whether it is declared is the engine's to say.
func (t EventType) Valid() bool {
	if len(t) == 0 || len(t) > 64 || t[0] < 'a' || t[0] > 'z' {
		return false
	}
	for i := 1; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Words says in a few words, for people, what an event of one of the
// reference host's types reports: "A todo dead-lettered"; any other type
// is named as itself (its declaration has its words).
func (t EventType) Words() string {
	switch t {
	case EventTodoDeadLettered:
		return "A todo dead-lettered"
	case EventRelayExhausted:
		return "A relay ran out of attempts"
	case EventDeliveryQuarantined:
		return "A webhook delivery was quarantined"
	case EventRuleNotify:
		return "A routing rule matched a webhook delivery"
	case EventAgentNotify:
		return "An agent paged its owner"
	case EventDigest:
		return "A queue digest"
	default:
		return string(t)
	}
}

// DefaultSeverity is the severity an event of one of the reference host's
// types carries unless its source says otherwise (REQ-6's table); normal
// for any other type (its declaration has its severity).
func (t EventType) DefaultSeverity() Severity {
	switch t {
	case EventTodoDeadLettered, EventRelayExhausted:
		return SeverityHigh
	case EventDigest:
		return SeverityLow
	default:
		return SeverityNormal
	}
}

// ParseEventType checks that an event type given by a caller is well
// formed (Valid); field names the input field for the error.
func ParseEventType(field, v string) (EventType, error) {
	t := EventType(v)
	if !t.Valid() {
		return "", InvalidArgument(field, fmt.Sprintf("%q is not an event type name", v))
	}
	return t, nil
}

// Severity orders low < normal < high (D6).
type Severity string

const (
	SeverityLow    Severity = "low"
	SeverityNormal Severity = "normal"
	SeverityHigh   Severity = "high"
)

// Severities lists the severities from lowest to highest.
var Severities = []Severity{SeverityLow, SeverityNormal, SeverityHigh}

// Rank is 0 for low, 1 for normal, 2 for high and -1 for anything else.
func (s Severity) Rank() int { return slices.Index(Severities, s) }

// Valid reports whether s is low, normal or high.
func (s Severity) Valid() bool { return s.Rank() >= 0 }

// AtLeast reports whether s is at or above min.
func (s Severity) AtLeast(min Severity) bool { return s.Rank() >= min.Rank() }

// ParseSeverity validates a severity given by a caller; an empty value gives
// def.
func ParseSeverity(field, v string, def Severity) (Severity, error) {
	if v == "" {
		return def, nil
	}
	s := Severity(v)
	if !s.Valid() {
		return "", InvalidArgument(field, fmt.Sprintf("%q is not low, normal or high", v))
	}
	return s, nil
}
