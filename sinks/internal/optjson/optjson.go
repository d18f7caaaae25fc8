// Package optjson holds the small JSON helpers the sink kinds' option
// parsers share: reading an object strictly, refusing unknown keys, and
// naming a caller's key safely inside a dotted field path. Internal to
// sinks.
package optjson

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/switchboard/notify/notifytype"
)

// maxKeyRunes bounds how much of a caller's unknown key an error repeats.
const maxKeyRunes = 64

// IsNull reports whether raw is empty, blank or the JSON null.
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// Object decodes raw as a JSON object keyed by member name. Empty or null
// input gives a nil map and no error; anything but an object is refused
// with invalid_argument naming field.
func Object(field string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	if IsNull(raw) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, notifytype.InvalidArgument(field, "must be a JSON object")
	}
	return obj, nil
}

// OnlyKeys refuses the first (in sorted order) key of obj not in allowed,
// with invalid_argument naming field.key.
func OnlyKeys(field string, obj map[string]json.RawMessage, allowed ...string) error {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(allowed, k) {
			return notifytype.InvalidArgument(field+"."+FieldName(k), "unknown option")
		}
	}
	return nil
}

// String decodes a JSON string; anything else (null included) is refused
// with invalid_argument naming field.
func String(field string, raw json.RawMessage) (string, error) {
	var s string
	if IsNull(raw) || json.Unmarshal(raw, &s) != nil {
		return "", notifytype.InvalidArgument(field, "must be a string")
	}
	return s, nil
}

// FieldName makes a caller's key fit to appear in a field path: a plain
// key (letters, digits, _ and -, at most 64) as is, any other quoted with
// non-ASCII escaped and cut to 64 characters.
func FieldName(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	if r := []rune(k); len(r) > maxKeyRunes {
		k = string(r[:maxKeyRunes]) + "…"
	}
	return strconv.QuoteToASCII(k)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
