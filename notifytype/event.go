package notifytype

import (
	"fmt"
	"slices"
)

// EventType names what happened (REQ-6).
type EventType string

const (
	EventTodoDeadLettered    EventType = "todo.dead_lettered"
	EventRelayExhausted      EventType = "relay.exhausted"
	EventDeliveryQuarantined EventType = "delivery.quarantined"
	EventRuleNotify          EventType = "rule.notify"
	EventAgentNotify         EventType = "agent.notify"
	EventDigest              EventType = "digest"
)

// EventTypes lists every event type in the spec's order.
var EventTypes = []EventType{
	EventTodoDeadLettered, EventRelayExhausted, EventDeliveryQuarantined,
	EventRuleNotify, EventAgentNotify, EventDigest,
}

// Valid reports whether t is one of the spec's event types.
func (t EventType) Valid() bool { return slices.Contains(EventTypes, t) }

// Words says in a few words, for people, what an event of this type
// reports: "A todo dead-lettered".
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

// DefaultSeverity is the severity an event of this type carries unless its
// source says otherwise (REQ-6's table).
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

// ParseEventType validates an event type given by a caller; field names the
// input field for the error.
func ParseEventType(field, v string) (EventType, error) {
	t := EventType(v)
	if !t.Valid() {
		return "", InvalidArgument(field, fmt.Sprintf("unknown event type %q", v))
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
