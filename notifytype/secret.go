package notifytype

import "log/slog"

// Secret holds a credential: a Gotify token, a list of Apprise URLs, an
// authorization header value or a Cairn bearer. It prints, marshals and logs
// as "<secret>"; only Reveal gives the value, and only an adapter building a
// request should call it.
type Secret struct{ v string }

// NewSecret wraps a value.
func NewSecret(v string) Secret { return Secret{v: v} }

const redacted = "<secret>"

// Reveal returns the value.
func (s Secret) Reveal() string   { return s.v }
func (s Secret) IsZero() bool     { return s.v == "" }
func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// MarshalText implements encoding.TextMarshaler (and so JSON) as "<secret>".
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }
