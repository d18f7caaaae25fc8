package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboard/notify/notifytype"
)

// decodeArguments reads a tool call's arguments into In, checking them
// against the tool's input schema first, so that a client's mistake is an
// invalid_argument naming the field in the client's terms
// ("subscriptions[0].queues[1]"), never a Go type or the schema library's
// path. Numbers are kept as their JSON text until decoded into In, so an id
// is never rounded through a float64 and never printed in float form.
func decodeArguments[In any](raw json.RawMessage, schema *jsonschema.Schema, resolved *jsonschema.Resolved) (In, error) {
	var in In
	var v any
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return in, notifytype.InvalidArgument("arguments", "must be a JSON object")
		}
	}
	if v == nil {
		v = map[string]any{}
	}
	if _, ok := v.(map[string]any); !ok {
		return in, notifytype.InvalidArgument("arguments", "must be a JSON object")
	}
	if err := checkArgument("", v, schema); err != nil {
		return in, err
	}
	// A keyword the walk above does not read (none of the inferred schemas
	// has one today) is still enforced, in general terms.
	// It reads numbers as float64, which is fine for a check whose message
	// names no value.
	b, err := json.Marshal(v)
	if err != nil {
		return in, fmt.Errorf("error re-encoding tool arguments: %w", err)
	}
	var plain any
	if err := json.Unmarshal(b, &plain); err != nil {
		return in, fmt.Errorf("error re-decoding tool arguments: %w", err)
	}
	if err := resolved.Validate(&plain); err != nil {
		return in, notifytype.InvalidArgument("arguments", "do not match the tool's input schema (see tools/list)")
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, notifytype.InvalidArgument(fieldOf(err), "has the wrong type")
	}
	return in, nil
}

// fieldOf names the field of a decoding error, or "arguments".
func fieldOf(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field
	}
	return "arguments"
}

// checkArgument checks v (decoded with UseNumber) against the keywords the
// SDK's schema inference writes: type, properties, required,
// additionalProperties and items. path is v's place in the arguments.
func checkArgument(path string, v any, s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	field := path
	if field == "" {
		field = "arguments"
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 {
		if msg, ok := checkType(v, types); !ok {
			return notifytype.InvalidArgument(field, msg)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				return notifytype.InvalidArgument(join(path, name), "is required")
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub, known := s.Properties[k]
			if !known {
				if isFalse(s.AdditionalProperties) {
					return notifytype.InvalidArgument(join(path, k), "is not a field here; the fields are "+propertyList(s))
				}
				sub = s.AdditionalProperties
			}
			if err := checkArgument(join(path, k), v[k], sub); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			if err := checkArgument(field+"["+strconv.Itoa(i)+"]", item, s.Items); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkType reports whether v is of one of types, and if not, what it
// should be, in words.
func checkType(v any, types []string) (string, bool) {
	nullable := slices.Contains(types, "null")
	for _, t := range types {
		switch t {
		case "null":
			if v == nil {
				return "", true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return "", true
			}
		case "string":
			if _, ok := v.(string); ok {
				return "", true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return "", true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return "", true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return "", true
			}
		case "integer":
			if n, ok := v.(json.Number); ok {
				if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
					return "", true
				}
				if f, _, err := big.ParseFloat(n.String(), 10, 256, big.ToNearestEven); err == nil && f.IsInt() {
					return "is out of range: it must fit in 64 bits", false
				}
				return "must be a whole number", false
			}
		}
	}
	var want []string
	for _, t := range types {
		switch t {
		case "null":
		case "integer":
			want = append(want, "a whole number")
		case "boolean":
			want = append(want, "true or false")
		case "object":
			want = append(want, "a JSON object")
		case "array":
			want = append(want, "a list")
		default:
			want = append(want, "a "+t)
		}
	}
	if v == nil && !nullable {
		return "is required and may not be null: it must be " + strings.Join(want, " or "), false
	}
	return "must be " + strings.Join(want, " or "), false
}

// isFalse reports whether s is the schema false (what inference writes for
// a struct's additionalProperties).
func isFalse(s *jsonschema.Schema) bool {
	if s == nil || s.Not == nil {
		return false
	}
	b, err := json.Marshal(s.Not)
	return err == nil && string(b) == "true"
}

// propertyList lists an object schema's properties, sorted.
func propertyList(s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return "none"
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
