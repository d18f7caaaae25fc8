package cairn

import (
	"time"

	"github.com/switchboard/notify/notifytype"
)

// Defaults of a digest artifact (D20).
const (
	// TTLDefault is how long an artifact lives unless the server allows
	// less: 7 days.
	TTLDefault = 7 * 24 * time.Hour
	// TagDigest tags every digest artifact.
	TagDigest = "switchboard-digest"
	// ContentType is the artifact's content type.
	ContentType = "text/markdown"
	// TimeoutDefault bounds each request: 10 seconds, as a delivery.
	TimeoutDefault = 10 * time.Second
	// MaxContentBytes bounds the content published.
	MaxContentBytes = 1 << 20
)

// Config is one Cairn connection as the engine resolved it.
type Config struct {
	// BaseURL is the server's base URL, the connection's account key.
	// Required.
	BaseURL string
	// Token is the bearer secret, the connection's secret. Required.
	Token notifytype.Secret
	// TTL is the artifact's lifetime before the server's cap. Defaults to
	// TTLDefault (7 days).
	TTL time.Duration
	// Timeout bounds each request. Defaults to TimeoutDefault (10 s).
	Timeout time.Duration
}

// WithDefaults fills the unset fields.
func (c Config) WithDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = TTLDefault
	}
	if c.Timeout <= 0 {
		c.Timeout = TimeoutDefault
	}
	return c
}
