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
