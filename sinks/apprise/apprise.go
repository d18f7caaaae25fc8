package apprise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// kind names the adapter in errors and String.
const kind = "apprise"

// ErrNoTarget reports a sink that has neither a config_key nor Apprise URLs,
// or both; the engine refuses such a sink on save, so meeting one at send
// time is a configuration error (class config, not retried).
var ErrNoTarget = errors.New("apprise sink needs exactly one of config_key or Apprise URLs")

// ErrBadConfigKey reports a config_key that ParseOptions would refuse,
// met at send time (class config).
var ErrBadConfigKey = errors.New("apprise config_key must be 1 to 128 letters, digits, _ or -")

// Config is one Apprise sink as the engine resolved it: its connection's
// base URL and secret, and its options.
type Config struct {
	// BaseURL is the Apprise API's base URL, the connection's account key;
	// it may carry a path prefix.
	BaseURL string
	// Secret is the connection's secret: the Apprise URLs of a stateless
	// sink and an optional Authorization header value.
	Secret Secret
	// Options are the sink's options; Options.ConfigKey set makes the sink
	// stateful. A zero Types map means the defaults.
	Options Options
	// PrivateHosts is the operator's private-host allowlist
	// (SWITCHBOARD_PRIVATE_HOSTS), as the guarded client has it: the hosts
	// inside a stateless sink's Apprise URLs (Hosts) are checked against
	// it before each send. Defaults to none: every private, loopback or
	// special-purpose address is refused.
	PrivateHosts []netip.Prefix
	// Resolver resolves the host names inside the Apprise URLs. Defaults
	// to nil: the system's resolver.
	Resolver sinks.Resolver
}

// Apprise delivers messages to one Apprise API server (REQ-4). It is safe
// for concurrent use, and prints and logs without its secret.
type Apprise struct {
	cfg    *Config // a pointer, so printing the struct shows an address, not the secret
	client *http.Client
	now    func() time.Time
}

var _ sinks.Adapter = (*Apprise)(nil)

// New returns the adapter for cfg sending through client, which should be
// the guarded client (sinks.NewClient).
func New(cfg Config, client *http.Client) *Apprise {
	return &Apprise{cfg: &cfg, client: client, now: time.Now}
}

type payload struct {
	URLs   string `json:"urls,omitempty"`
	Body   string `json:"body"`
	Title  string `json:"title"`
	Type   string `json:"type"`
	Tag    string `json:"tag,omitempty"`
	Format string `json:"format"`
}

// Deliver makes one attempt. A stateless sink first checks the hosts inside
// its Apprise URLs (checkHosts): one the guard refuses is class blocked and
// nothing is sent. A stateful sink posts {body, title, type,
// tag?, format: "text"} to {base}/notify/{config_key}; a stateless one adds
// its Apprise URLs (a comma-and-space separated string, the form the Apprise
// API reads) and posts to {base}/notify/. 200 is delivered, 424 class
// partial, 204 class config; any other status is classified by
// sinks.ClassifyStatus.
//
// Every request says Connection: close. The Apprise API writes a JSON body
// with its 204, which HTTP forbids; on a kept-alive connection Go's
// transport would find those bytes while the connection sits idle, log
// "Unsolicited response received on idle HTTP channel" (with the start of
// the body) to the standard logger and drop the connection. A connection
// used once and closed is never read while idle.
func (a *Apprise) Deliver(ctx context.Context, msg sinks.Message) sinks.Result {
	o := a.cfg.Options
	p := payload{Body: msg.Body, Title: msg.Title, Type: o.Type(msg.Severity), Tag: o.Tag, Format: "text"}
	path := []string{"notify", o.ConfigKey}
	switch {
	case o.Stateful() == (len(a.cfg.Secret.URLs) > 0):
		return sinks.Result{Class: notifytype.ClassConfig, Err: fmt.Errorf("error delivering to %s: %w", kind, ErrNoTarget)}
	case o.Stateful() && !configKeyRE.MatchString(o.ConfigKey):
		return sinks.Result{Class: notifytype.ClassConfig, Err: fmt.Errorf("error delivering to %s: %w", kind, ErrBadConfigKey)}
	case !o.Stateful():
		if err := a.checkHosts(ctx); err != nil {
			return sinks.ErrorResult(kind, err)
		}
		p.URLs = joinURLs(a.cfg.Secret.URLs)
		path = []string{"notify/"}
	}
	endpoint, err := sinks.Endpoint(a.cfg.BaseURL, path...)
	if err != nil {
		return sinks.ErrorResult(kind, err)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return sinks.ErrorResult(kind, fmt.Errorf("error encoding message: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return sinks.ErrorResult(kind, sinks.ErrInvalidURL)
	}
	req.Close = true // see the doc comment: the 204-with-a-body answer
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if auth := a.cfg.Secret.Authorization; auth != "" {
		req.Header.Set("Authorization", auth)
	}

	resp, err := a.client.Do(req)
	if err != nil {
		return sinks.ErrorResult(kind, err)
	}
	defer sinks.Drain(resp.Body)
	return sinks.StatusResult(kind, resp, ClassifyStatus(resp.StatusCode), a.now())
}

// checkHosts applies the SSRF guard's rule to the hosts inside the Apprise
// URLs, which the Apprise server, not our guarded client, connects to: a
// host that is, or resolves to, an address the guard refuses is class
// blocked, as a sink's own private server is; a name that does not resolve
// is a network error, retried. The error names the URL by its place in
// the list, never its host.
func (a *Apprise) checkHosts(ctx context.Context) error {
	for i, u := range a.cfg.Secret.URLs {
		hosts, err := Destinations(u)
		if err != nil {
			return fmt.Errorf("error reading Apprise URL %d: %w", i+1, err)
		}
		for _, host := range hosts {
			if err := sinks.CheckHost(ctx, a.cfg.Resolver, host, a.cfg.PrivateHosts); err != nil {
				return fmt.Errorf("error checking the host of Apprise URL %d: %w", i+1, err)
			}
		}
	}
	return nil
}

// ClassifyStatus is the error class of an Apprise API answer: 200
// delivered, 424 partial (at least one service failed, or the tag matched
// nothing), 204 config (no configuration, or no valid URL); anything else
// as sinks.ClassifyStatus says (so another 2xx is delivered).
func ClassifyStatus(code int) notifytype.ErrorClass {
	switch code {
	case http.StatusOK:
		return notifytype.ClassNone
	case http.StatusFailedDependency:
		return notifytype.ClassPartial
	case http.StatusNoContent:
		return notifytype.ClassConfig
	}
	return sinks.ClassifyStatus(code)
}

func joinURLs(urls []string) string {
	trimmed := make([]string, 0, len(urls))
	for _, u := range urls {
		if u = strings.TrimSpace(u); u != "" {
			trimmed = append(trimmed, u)
		}
	}
	return strings.Join(trimmed, ", ")
}

// String names the sink by its base URL and config key, never its secret.
func (a Apprise) String() string {
	if a.cfg == nil {
		return kind + "(unconfigured)"
	}
	s := kind + "(" + sinks.DisplayURL(a.cfg.BaseURL)
	if a.cfg.Options.ConfigKey != "" {
		s += " key " + a.cfg.Options.ConfigKey
	} else {
		s += fmt.Sprintf(" %d urls", len(a.cfg.Secret.URLs))
	}
	return s + ")"
}

// GoString is String.
func (a Apprise) GoString() string { return a.String() }

// Format prints String for every verb, so no verb reaches the secret.
func (a Apprise) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(a.String())) }

// LogValue implements slog.LogValuer.
func (a Apprise) LogValue() slog.Value { return slog.StringValue(a.String()) }
