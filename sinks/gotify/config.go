package gotify

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/internal/optjson"
)

// Default Gotify priorities per severity (REQ-2), and the range Gotify
// accepts.
const (
	PriorityLowDefault    = 2
	PriorityNormalDefault = 5
	PriorityHighDefault   = 8

	PriorityMin = 0
	PriorityMax = 10
)

// Options are a Gotify sink's per-kind options, stored on the sink row as
// JSON.
type Options struct {
	// Priorities maps a severity to the Gotify priority its messages carry.
	// Defaults to low 2, normal 5, high 8; a partial map is filled with the
	// defaults for the severities it leaves out.
	Priorities map[notifytype.Severity]int `json:"priorities"`
}

// DefaultOptions returns the options of a sink that sets none.
func DefaultOptions() Options { return Options{}.WithDefaults() }

// WithDefaults returns a copy of o whose priority map names every severity,
// missing ones set to their default.
func (o Options) WithDefaults() Options {
	p := make(map[notifytype.Severity]int, len(notifytype.Severities))
	p[notifytype.SeverityLow] = PriorityLowDefault
	p[notifytype.SeverityNormal] = PriorityNormalDefault
	p[notifytype.SeverityHigh] = PriorityHighDefault
	maps.Copy(p, o.Priorities)
	return Options{Priorities: p}
}

// Priority is the Gotify priority for a message of severity s. A severity
// the map does not name (or an invalid one) gets its default, and an
// unknown severity the normal default.
func (o Options) Priority(s notifytype.Severity) int {
	if p, ok := o.Priorities[s]; ok {
		return p
	}
	switch s {
	case notifytype.SeverityLow:
		return PriorityLowDefault
	case notifytype.SeverityHigh:
		return PriorityHighDefault
	default:
		return PriorityNormalDefault
	}
}

// ParseOptions reads a Gotify sink's options as an owner gave them. Empty
// or null input gives the defaults. Unknown keys, in options or in
// priorities, and priorities outside 0..10 are refused with invalid_argument
// naming the field ("options.priorities.high").
func ParseOptions(raw json.RawMessage) (Options, error) {
	obj, err := optjson.Object("options", raw)
	if err != nil || obj == nil {
		return DefaultOptions(), err
	}
	if err := optjson.OnlyKeys("options", obj, "priorities"); err != nil {
		return Options{}, err
	}
	var o Options
	if v, ok := obj["priorities"]; ok && !optjson.IsNull(v) {
		pri, err := optjson.Object("options.priorities", v)
		if err != nil {
			return Options{}, err
		}
		o.Priorities = make(map[notifytype.Severity]int, len(pri))
		for _, k := range slices.Sorted(maps.Keys(pri)) {
			field := "options.priorities." + optjson.FieldName(k)
			if !notifytype.Severity(k).Valid() {
				return Options{}, notifytype.InvalidArgument(field, "unknown severity; use low, normal or high")
			}
			n, err := parsePriority(field, pri[k])
			if err != nil {
				return Options{}, err
			}
			o.Priorities[notifytype.Severity(k)] = n
		}
	}
	return o.WithDefaults(), nil
}

func parsePriority(field string, v json.RawMessage) (int, error) {
	var n int
	if optjson.IsNull(v) || json.Unmarshal(v, &n) != nil || n < PriorityMin || n > PriorityMax {
		return 0, notifytype.InvalidArgument(field, fmt.Sprintf("must be an integer from %d to %d", PriorityMin, PriorityMax))
	}
	return n, nil
}
