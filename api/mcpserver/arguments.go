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
	"unicode/utf8"

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
	v, err := checkArgument("", v, schema, true)
	if err != nil {
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
// schemas here carry: type, properties, required, additionalProperties,
// items, enum, minimum, maximum, minLength, maxLength, minItems and
// maxItems. path is v's place in the arguments; required says whether v's
// field is required. It returns v with every whole number written as an
// integer (1.0 and 1e3 are 1 and 1000), ready to decode into In.
func checkArgument(path string, v any, s *jsonschema.Schema, required bool) (any, error) {
	if s == nil {
		return v, nil
	}
	field := path
	if field == "" {
		field = "arguments"
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if v == nil && len(types) > 0 && !slices.Contains(types, "null") {
		// No schema here declares null: a null is never "none", so a
		// required list given as null is not taken to clear it.
		want := strings.Join(typeWords(types), " or ")
		if required {
			return nil, notifytype.InvalidArgument(field, "is required and may not be null: it must be "+want)
		}
		return nil, notifytype.InvalidArgument(field, "may not be null: omit it, or give "+want)
	}
	if len(types) > 0 {
		nv, msg, ok := checkType(v, types)
		if !ok {
			return nil, notifytype.InvalidArgument(field, msg)
		}
		v = nv
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		words := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			words[i] = fmt.Sprint(e)
		}
		return nil, notifytype.InvalidArgument(field, "must be one of "+strings.Join(words, ", "))
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				return nil, notifytype.InvalidArgument(join(path, name), "is required")
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
					return nil, notifytype.InvalidArgument(join(path, k), "is not a field here; the fields are "+propertyList(s))
				}
				sub = s.AdditionalProperties
			}
			nv, err := checkArgument(join(path, k), v[k], sub, known && slices.Contains(s.Required, k))
			if err != nil {
				return nil, err
			}
			v[k] = nv
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems {
			return nil, notifytype.InvalidArgumentf(field, "needs at least %d %s", *s.MinItems, plural(*s.MinItems, "item"))
		}
		if s.MaxItems != nil && len(v) > *s.MaxItems {
			return nil, notifytype.InvalidArgumentf(field, "may have at most %d %s", *s.MaxItems, plural(*s.MaxItems, "item"))
		}
		for i, item := range v {
			nv, err := checkArgument(field+"["+strconv.Itoa(i)+"]", item, s.Items, true)
			if err != nil {
				return nil, err
			}
			v[i] = nv
		}
	case string:
		n := utf8.RuneCountInString(v)
		if s.MinLength != nil && n < *s.MinLength {
			return nil, notifytype.InvalidArgumentf(field, "must be at least %d %s", *s.MinLength, plural(*s.MinLength, "character"))
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return nil, notifytype.InvalidArgumentf(field, "must be at most %d %s", *s.MaxLength, plural(*s.MaxLength, "character"))
		}
	case json.Number:
		if msg, ok := inBounds(v, s); !ok {
			return nil, notifytype.InvalidArgument(field, msg)
		}
	}
	return v, nil
}

// inBounds checks a number against s's minimum and maximum, exactly.
func inBounds(n json.Number, s *jsonschema.Schema) (string, bool) {
	if s.Minimum == nil && s.Maximum == nil {
		return "", true
	}
	f, _, err := big.ParseFloat(n.String(), 10, 256, big.ToNearestEven)
	if err != nil {
		return "must be a number", false
	}
	lo, hi := s.Minimum, s.Maximum
	if (lo != nil && f.Cmp(big.NewFloat(*lo)) < 0) || (hi != nil && f.Cmp(big.NewFloat(*hi)) > 0) {
		switch {
		case lo != nil && hi != nil:
			return fmt.Sprintf("must be from %s to %s", num(*lo), num(*hi)), false
		case lo != nil:
			return "must be at least " + num(*lo), false
		default:
			return "must be at most " + num(*hi), false
		}
	}
	return "", true
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// checkType reports whether v is of one of types, and if not, what it
// should be, in words. A whole number given for an integer (1.0, 1e3) is
// returned as the integer it is.
func checkType(v any, types []string) (any, string, bool) {
	for _, t := range types {
		switch t {
		case "null":
			if v == nil {
				return v, "", true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return v, "", true
			}
		case "string":
			if _, ok := v.(string); ok {
				return v, "", true
			}
		case "object":
			if _, ok := v.(map[string]any); ok {
				return v, "", true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return v, "", true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return v, "", true
			}
		case "integer":
			if n, ok := v.(json.Number); ok {
				if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
					return v, "", true
				}
				f, _, err := big.ParseFloat(n.String(), 10, 256, big.ToNearestEven)
				if err != nil || !f.IsInt() {
					return nil, "must be a whole number", false
				}
				i, acc := f.Int64()
				if acc != big.Exact {
					return nil, "is out of range: it must fit in 64 bits", false
				}
				return json.Number(strconv.FormatInt(i, 10)), "", true
			}
		}
	}
	return nil, "must be " + strings.Join(typeWords(types), " or "), false
}

// typeWords names types in words, null left out.
func typeWords(types []string) []string {
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
	return want
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
