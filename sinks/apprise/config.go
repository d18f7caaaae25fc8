package apprise

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/internal/optjson"
)

// The Apprise notification types.
const (
	TypeInfo    = "info"
	TypeSuccess = "success"
	TypeWarning = "warning"
	TypeFailure = "failure"
)

// Types lists the notification types the Apprise API accepts.
var Types = []string{TypeInfo, TypeSuccess, TypeWarning, TypeFailure}

// Default Apprise types per severity (REQ-2).
const (
	TypeLowDefault    = TypeInfo
	TypeNormalDefault = TypeWarning
	TypeHighDefault   = TypeFailure
)

// TagMaxLen is the longest tag expression a sink may carry.
const TagMaxLen = 256

// DefaultDeniedSchemes are the Apprise URL schemes refused unless the
// operator allows them (REQ-4): the generic HTTP schemes, which would turn
// the Apprise server into an open relay to any host, and the local-system
// schemes, which act on the Apprise server's own machine. dbus's sibling
// schemes (kde, qt, glib) are the same plugin and are refused with it.
var DefaultDeniedSchemes = []string{
	"json", "jsons", "xml", "xmls", "form", "forms",
	"windows", "dbus", "kde", "qt", "glib", "gnome", "macosx", "syslog",
}

var (
	configKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// tagRE is the Apprise tag grammar: tags separated by commas (any of)
	// and spaces (all of).
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_\-., ]*$`)
	schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.\-]{0,31}$`)
)

// Options are an Apprise sink's per-kind options, stored on the sink row as
// JSON. Exactly one of ConfigKey and the connection's Secret.URLs is set;
// the engine checks that, not this package.
type Options struct {
	// ConfigKey names a configuration stored on the Apprise server; set, the
	// sink is stateful and posts to /notify/{config_key}. Defaults to unset
	// (stateless: the connection's secret carries the Apprise URLs).
	ConfigKey string `json:"config_key,omitempty"`

	// Tag is an Apprise tag expression sent with every message. Defaults to
	// unset (no tag).
	Tag string `json:"tag,omitempty"`

	// Types maps a severity to an Apprise notification type. Defaults to
	// low info, normal warning, high failure; a partial map is filled with
	// the defaults.
	Types map[notifytype.Severity]string `json:"types"`
}

// DefaultOptions returns the options of a sink that sets none.
func DefaultOptions() Options { return Options{}.WithDefaults() }

// WithDefaults returns a copy of o whose type map names every severity.
func (o Options) WithDefaults() Options {
	t := map[notifytype.Severity]string{
		notifytype.SeverityLow:    TypeLowDefault,
		notifytype.SeverityNormal: TypeNormalDefault,
		notifytype.SeverityHigh:   TypeHighDefault,
	}
	maps.Copy(t, o.Types)
	o.Types = t
	return o
}

// Stateful reports whether the sink posts to a stored configuration
// (config_key set) rather than carrying Apprise URLs.
func (o Options) Stateful() bool { return o.ConfigKey != "" }

// Type is the Apprise type for a message of severity s; a severity the map
// does not name gets its default, an unknown one the normal default.
func (o Options) Type(s notifytype.Severity) string {
	if t, ok := o.Types[s]; ok && slices.Contains(Types, t) {
		return t
	}
	switch s {
	case notifytype.SeverityLow:
		return TypeLowDefault
	case notifytype.SeverityHigh:
		return TypeHighDefault
	default:
		return TypeNormalDefault
	}
}

// ParseOptions reads an Apprise sink's options as an owner gave them. Empty
// or null input gives the defaults. Unknown keys (in options or types), a
// type other than info, success, warning or failure, a malformed config_key
// or tag are refused with invalid_argument naming the field.
func ParseOptions(raw json.RawMessage) (Options, error) {
	obj, err := optjson.Object("options", raw)
	if err != nil || obj == nil {
		return DefaultOptions(), err
	}
	if err := optjson.OnlyKeys("options", obj, "config_key", "tag", "types"); err != nil {
		return Options{}, err
	}
	var o Options
	if v, ok := obj["config_key"]; ok && !optjson.IsNull(v) {
		if o.ConfigKey, err = optjson.String("options.config_key", v); err != nil {
			return Options{}, err
		}
		if !configKeyRE.MatchString(o.ConfigKey) {
			return Options{}, notifytype.InvalidArgument("options.config_key", "must be 1 to 128 letters, digits, _ or -")
		}
	}
	if v, ok := obj["tag"]; ok && !optjson.IsNull(v) {
		if o.Tag, err = optjson.String("options.tag", v); err != nil {
			return Options{}, err
		}
		if len(o.Tag) > TagMaxLen || !tagRE.MatchString(o.Tag) {
			return Options{}, notifytype.InvalidArgument("options.tag", fmt.Sprintf("must be at most %d letters, digits, _ - . , or spaces", TagMaxLen))
		}
		o.Tag = strings.TrimSpace(o.Tag)
	}
	if v, ok := obj["types"]; ok && !optjson.IsNull(v) {
		types, err := optjson.Object("options.types", v)
		if err != nil {
			return Options{}, err
		}
		o.Types = make(map[notifytype.Severity]string, len(types))
		for _, k := range slices.Sorted(maps.Keys(types)) {
			field := "options.types." + optjson.FieldName(k)
			if !notifytype.Severity(k).Valid() {
				return Options{}, notifytype.InvalidArgument(field, "unknown severity; use low, normal or high")
			}
			t, err := optjson.String(field, types[k])
			if err != nil {
				return Options{}, err
			}
			if !slices.Contains(Types, t) {
				return Options{}, notifytype.InvalidArgument(field, "must be info, success, warning or failure")
			}
			o.Types[notifytype.Severity(k)] = t
		}
	}
	return o.WithDefaults(), nil
}

// Secret is an Apprise connection's secret, stored sealed as the JSON that
// Encode writes and ParseSecret reads. URLs are set for a stateless sink;
// Authorization is an optional header value for an Apprise API behind an
// authenticating proxy.
//
// Secret prints, logs and marshals (json.Marshal) as "<secret>"; only Encode
// gives its content, for sealing.
type Secret struct {
	URLs          []string `json:"urls,omitempty"`
	Authorization string   `json:"authorization,omitempty"`
}

// secretJSON is Secret's sealed form; it has Secret's fields and tags but
// none of its redacting methods.
type secretJSON Secret

// ParseSecret reads a sealed secret's plaintext. An empty string is the
// zero Secret. The error never repeats the input.
func ParseSecret(s string) (Secret, error) {
	if strings.TrimSpace(s) == "" {
		return Secret{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var v secretJSON
	if err := dec.Decode(&v); err != nil || dec.More() {
		return Secret{}, notifytype.InvalidArgument("secret", "is not an Apprise secret (a JSON object with urls and/or authorization)")
	}
	for _, u := range v.URLs {
		if err := checkURLShape(u); err != nil {
			return Secret{}, err
		}
	}
	if strings.ContainsAny(v.Authorization, "\r\n\x00") {
		return Secret{}, notifytype.InvalidArgument("secret.authorization", "must be a single-line header value")
	}
	return Secret(v), nil
}

// Encode returns the secret's sealed form, the JSON ParseSecret reads.
func (s Secret) Encode() string {
	b, err := json.Marshal(secretJSON(s))
	if err != nil { // a struct of strings always marshals
		panic(fmt.Sprintf("error encoding apprise secret: %v", err))
	}
	return string(b)
}

// IsZero reports whether the secret carries nothing.
func (s Secret) IsZero() bool { return len(s.URLs) == 0 && s.Authorization == "" }

// String describes the secret without its content.
func (s Secret) String() string {
	auth := "no authorization"
	if s.Authorization != "" {
		auth = "authorization set"
	}
	return fmt.Sprintf("<secret: %d apprise urls, %s>", len(s.URLs), auth)
}

// GoString is String, so %#v redacts too.
func (s Secret) GoString() string { return s.String() }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON marshals as "<secret>"; use Encode for the sealed form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"<secret>"`), nil }

// CheckSchemes refuses an Apprise URL whose scheme (lower-cased, the part
// before "://") is in denied, with forbidden_scheme naming the scheme. A
// URL without a scheme is invalid_argument on secret.urls. No error ever
// repeats a URL.
func CheckSchemes(urls []string, denied []string) error {
	for _, u := range urls {
		if err := checkURLShape(u); err != nil {
			return err
		}
		scheme := Scheme(u)
		if slices.ContainsFunc(denied, func(d string) bool { return strings.EqualFold(d, scheme) }) {
			return notifytype.ForbiddenScheme(scheme)
		}
	}
	return nil
}

// Scheme returns an Apprise URL's scheme lower-cased, or "" when it has
// none.
func Scheme(u string) string {
	scheme, _, ok := strings.Cut(strings.TrimSpace(u), "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// checkURLShape refuses a URL the stateless request could not carry: no
// scheme, a scheme that is not one, or white space or a control character
// inside it (the Apprise API splits its urls string on white space).
func checkURLShape(u string) error {
	if !schemeRE.MatchString(Scheme(u)) {
		return notifytype.InvalidArgument("secret.urls", "every Apprise URL must start with scheme://")
	}
	if strings.IndexFunc(strings.TrimSpace(u), isSpaceOrControl) >= 0 {
		return notifytype.InvalidArgument("secret.urls", "an Apprise URL must not contain white space or control characters")
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
