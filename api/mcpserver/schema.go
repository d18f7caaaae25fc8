package mcpserver

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// A tool's schemas say what is sent, and what the server enforces.
//
// jsonschema-go infers every slice and every pointer as nullable
// (type ["null", ...]), because a nil slice marshals as null. Nothing here
// sends null: outputs are normalised (a nil list is sent as [], a nil map
// as {}: normalise) and optional fields are omitted, never null; and an
// argument given as null is refused (checkArgument), so that a required
// list given as null cannot silently mean "none". So schemaFor drops null
// from every type, then lets the types refine their schemas with the
// allowed values (enum) and the limits (minimum, maximum, minLength,
// maxLength, minItems, maxItems) the server enforces, which
// checkArgument then checks field by field.

// limits are the operator's bounds a schema declares (engine.Config).
type limits struct {
	budgetPerHourMin, budgetPerHourMax int
	budgetBurstMin, budgetBurstMax     int
	// eventTypes are the engine's declared event types (EventKinds).
	eventTypes []any
}

func limitsOf(e *engine.Engine) limits {
	c := e.Config()
	return limits{
		budgetPerHourMin: c.BudgetPerHourMin, budgetPerHourMax: c.BudgetPerHourMax,
		budgetBurstMin: c.BudgetBurstMin, budgetBurstMax: c.BudgetBurstMax,
		eventTypes: eventTypesOf(e),
	}
}

// eventTypesOf is the engine's declared event types, in its order.
func eventTypesOf(e *engine.Engine) []any {
	var out []any
	for _, k := range e.EventKinds() {
		out = append(out, string(k.Type))
	}
	return out
}

// refiner is a struct type that adds enums and limits to its inferred
// schema s (its own object schema, nulls already dropped).
type refiner interface {
	refineSchema(s *jsonschema.Schema, l limits)
}

// schemaFor infers t's schema, drops null from its types and refines it.
func schemaFor(t reflect.Type, l limits) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	dropNull(s)
	refine(t, s, l)
	return s, nil
}

// dropNull removes "null" from every type of s and its subschemas.
func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if slices.Contains(s.Types, "null") {
		rest := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(rest) == 1 {
			s.Type, s.Types = rest[0], nil
		} else {
			s.Types = rest
		}
	}
	for _, p := range s.Properties {
		dropNull(p)
	}
	dropNull(s.Items)
	dropNull(s.AdditionalProperties)
}

// refine walks t alongside its schema s, calling refineSchema of every
// struct type that has one.
func refine(t reflect.Type, s *jsonschema.Schema, l limits) {
	if s == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if sub := s.Properties[name]; sub != nil {
				refine(f.Type, sub, l)
			}
		}
		if r, ok := reflect.Zero(t).Interface().(refiner); ok {
			r.refineSchema(s, l)
		}
	case reflect.Slice, reflect.Array:
		refine(t.Elem(), s.Items, l)
	case reflect.Map:
		refine(t.Elem(), s.AdditionalProperties, l)
	}
}

// prop returns the property path of s ("action.queue", "rules.action" for
// a list's items), panicking on a path the type does not have: a schema
// refinement that names no field is a programming error.
func prop(s *jsonschema.Schema, path string) *jsonschema.Schema {
	for part := range strings.SplitSeq(path, ".") {
		if s.Items != nil && s.Properties == nil {
			s = s.Items
		}
		next := s.Properties[part]
		if next == nil {
			panic(fmt.Sprintf("mcpserver: schema has no property %q (of %q)", part, path))
		}
		s = next
	}
	return s
}

// Allowed values, as schemas declare them.
var (
	severityEnum = enumOf(notifytype.Severities)
	sinkKindEnum = []any{engine.KindGotify, engine.KindApprise}
	connKindEnum = enumOf(engine.ConnectionKinds)
	classEnum    = enumOf(notifytype.ErrorClasses)
)

func enumOf[T ~string](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// bounded sets s's minimum and maximum.
func bounded(s *jsonschema.Schema, lo, hi float64) {
	s.Minimum, s.Maximum = &lo, &hi
}

// length sets a string's length in characters.
func length(s *jsonschema.Schema, lo, hi int) {
	if lo > 0 {
		s.MinLength = &lo
	}
	s.MaxLength = &hi
}

// normalise makes v (a decoded JSON value) say what s declares: a null
// where s declares a list is [], where it declares an object {}. A Go nil
// slice or map means none; the schema says so without null.
func normalise(v any, s *jsonschema.Schema) any {
	if s == nil {
		return v
	}
	switch v := v.(type) {
	case nil:
		switch s.Type {
		case "array":
			return []any{}
		case "object":
			return map[string]any{}
		}
	case map[string]any:
		for k, e := range v {
			sub, ok := s.Properties[k]
			if !ok {
				sub = s.AdditionalProperties
			}
			v[k] = normalise(e, sub)
		}
	case []any:
		for i, e := range v {
			v[i] = normalise(e, s.Items)
		}
	}
	return v
}
