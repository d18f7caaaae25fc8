package apprise

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

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

// DefaultAllowedSchemes are the Apprise URL schemes a stateless sink may
// use unless the operator replaces the list (REQ-4, D23): the schemes of
// Apprise's notification services (taken from Apprise 1.2's plugins; a test
// compares them with the installed Apprise), less ExcludedSchemes.
var DefaultAllowedSchemes = []string{
	"bark", "barks", "boxcar", "bulksms", "clicksend", "d7sms", "dapnet",
	"dingtalk", "discord", "emby", "embys", "enigma2", "enigma2s", "faast", "fcm", "flock", "gchat",
	"gitter", "gotify", "gotifys", "growl", "guilded", "hassio", "hassios", "ifttt", "join",
	"kavenegar", "kodi", "kodis", "kumulos", "lametric", "lametrics", "line", "mailgun", "mailto",
	"mailtos", "mastodon", "mastodons", "matrix", "matrixs", "mmost", "mmosts", "mqtt", "mqtts",
	"msg91", "msgbird", "msteams", "ncloud", "nclouds", "nctalk", "nctalks", "nexmo", "notica",
	"noticas", "notifico", "ntfy", "ntfys", "o365", "onesignal", "opsgenie", "pagerduty", "parsep",
	"parseps", "pbul", "pjet", "pjets", "popcorn", "pover", "prowl", "psafer", "psafers", "push",
	"pushed", "reddit", "rocket", "rockets", "ryver", "schan", "sendgrid", "ses", "signal", "signals",
	"sinch", "slack", "smseagle", "smseagles", "smtp2go", "sns", "sparkpost", "spontit", "spush",
	"strmlabs", "tgram", "toot", "toots", "tweet", "twilio", "twist", "twitter", "vonage", "wxteams",
	"xbmc", "xbmcs", "zulip",
}

// ExcludedSchemes are the Apprise schemes the default allowlist leaves out
// (REQ-4): the generic HTTP schemes and apprise/apprises (another Apprise
// API, which forwards to whatever URLs it is given or posts to any host
// and port), which would turn the Apprise server into an open relay, and
// the local-system schemes, which act
// on the Apprise server's own machine (dbus's sibling schemes kde, qt and
// glib are the same plugin).
var ExcludedSchemes = []string{
	"json", "jsons", "xml", "xmls", "form", "forms", "apprise", "apprises",
	"windows", "dbus", "kde", "qt", "glib", "gnome", "macosx", "syslog",
}

var (
	configKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// tagRE is the Apprise tag grammar: tags separated by commas (any of)
	// and spaces (all of).
	tagRE = regexp.MustCompile(`^[A-Za-z0-9_\-., ]*$`)
	// schemeRE is an Apprise scheme as written: ASCII letters and digits
	// (every Apprise plugin's scheme is one).
	schemeRE = regexp.MustCompile(`^[A-Za-z0-9]{1,32}$`)
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

// CheckSchemes checks a stateless sink's Apprise URLs against allowed, the
// scheme allowlist (REQ-4, D23). Each URL is read the way every Apprise
// from 1.2 to the newest reads it (Splitters): every scheme any of them
// would find in it must be allowed, else forbidden_scheme naming the first
// one that is not. A URL must hold exactly one URL: one that any of them
// would read as more than one, or that only looks like two (a comma or a
// space before something:// , OneURL), is invalid_argument on secret.urls,
// as is a URL without a scheme, with white space or control characters.
// The list as sent, joined, must read back as the same URLs, each
// unchanged, under every splitter. A URL whose meaning could differ
// between Apprise's parser and another (a backslash, an argument named
// twice or in capitals, a "#" in the query, an encoded host: see
// parseURL) is invalid_argument on secret.urls naming what. No error ever
// repeats a URL.
func CheckSchemes(urls []string, allowed []string) error {
	for _, u := range urls {
		// The schemes first, so that a smuggled json:// is named as such.
		most := 0
		for _, sp := range Splitters {
			parts := sp.Split(strings.TrimSpace(u))
			for _, part := range parts {
				if err := checkAllowed(part, allowed); err != nil {
					return err
				}
			}
			most = max(most, len(parts))
		}
		if err := checkURLShape(u); err != nil {
			return err
		}
		if most > 1 {
			return notifytype.InvalidArgument("secret.urls", fmt.Sprintf("Apprise would read one of these URLs as %d; give each service its own entry", most))
		}
		if hasSecondURL(u) {
			return notifytype.InvalidArgument("secret.urls", "an Apprise URL must hold one URL: a comma or space before another scheme:// would start a second one; give each service its own entry")
		}
		if _, err := parseURL(u); err != nil {
			return err
		}
	}
	joined := joinURLs(urls)
	want := make([]string, len(urls))
	for i, u := range urls {
		want[i] = strings.TrimSpace(u)
	}
	for _, sp := range Splitters {
		parts := sp.Split(joined)
		for _, part := range parts {
			if err := checkAllowed(part, allowed); err != nil {
				return err
			}
		}
		if len(parts) != len(urls) {
			return notifytype.InvalidArgument("secret.urls", fmt.Sprintf("Apprise %s would read these %d URLs as %d; give each service its own entry", sp.Versions, len(urls), len(parts)))
		}
		if !slices.Equal(parts, want) {
			// A URL ending in a comma loses it to the ", " between them.
			return notifytype.InvalidArgument("secret.urls", fmt.Sprintf("Apprise %s would read these URLs differently when sent together; an Apprise URL must not end in a comma", sp.Versions))
		}
	}
	return nil
}

// checkAllowed refuses one URL whose scheme is not in allowed.
func checkAllowed(u string, allowed []string) error {
	raw, _, ok := strings.Cut(strings.TrimSpace(u), "://")
	scheme := strings.ToLower(raw)
	if !ok || !schemeRE.MatchString(raw) {
		// Only letters that fold onto ASCII ones can get here; never
		// echo them.
		return notifytype.InvalidArgument("secret.urls", "every Apprise URL must start with scheme:// (ASCII letters and digits)")
	}
	if !slices.Contains(allowed, scheme) {
		return notifytype.ForbiddenScheme(scheme)
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
// scheme, a scheme that is not ASCII letters and digits, text that is not
// UTF-8, or white space or a control character inside it (Apprise splits
// its urls string on white space, Unicode's included).
func checkURLShape(u string) error {
	u = strings.TrimSpace(u)
	raw, _, ok := strings.Cut(u, "://")
	if !ok || !schemeRE.MatchString(raw) {
		return notifytype.InvalidArgument("secret.urls", "every Apprise URL must start with scheme:// (ASCII letters and digits)")
	}
	if !utf8.ValidString(u) {
		return notifytype.InvalidArgument("secret.urls", "an Apprise URL must be UTF-8 text")
	}
	if strings.IndexFunc(u, isSpaceOrControl) >= 0 {
		return notifytype.InvalidArgument("secret.urls", "an Apprise URL must not contain white space or control characters")
	}
	return nil
}

func isSpaceOrControl(r rune) bool {
	return isPySpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
