package gotify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// kind names the adapter in errors and String.
const kind = "gotify"

// Config is one Gotify sink as the engine resolved it: its connection's
// base URL and token, and its options.
type Config struct {
	// BaseURL is the server's base URL, the connection's account key; it
	// may carry a path prefix ("https://push.example.net/gotify").
	BaseURL string
	// Token is the application token, the connection's secret. It is sent
	// only in the X-Gotify-Key header.
	Token notifytype.Secret
	// Options are the sink's options; a zero value means the defaults.
	Options Options
}

// Gotify delivers messages to one Gotify server (REQ-3). It is safe for
// concurrent use, and prints and logs without its token.
type Gotify struct {
	cfg    *Config // a pointer, so printing the struct shows an address, not the secret
	client *http.Client
	now    func() time.Time
	// endpoint is {base}/message, checked and joined once (sinks.Endpoint),
	// or the reason the base URL cannot be used, returned by every Deliver.
	endpoint    string
	endpointErr error
}

var _ sinks.Adapter = (*Gotify)(nil)

// New returns the adapter for cfg sending through client, which should be
// the guarded client (sinks.NewClient).
func New(cfg Config, client *http.Client) *Gotify {
	g := &Gotify{cfg: &cfg, client: client, now: time.Now}
	if u, err := sinks.Endpoint(cfg.BaseURL, "message"); err != nil {
		g.endpointErr = err
	} else {
		g.endpoint = u.String()
	}
	return g
}

type payload struct {
	Title    string  `json:"title"`
	Message  string  `json:"message"`
	Priority int     `json:"priority"`
	Extras   *extras `json:"extras,omitempty"`
}

// Extras keys Gotify's clients read (https://gotify.net/docs/msgextras).
const (
	// ExtrasDisplay carries {"contentType": "text/markdown"}: the web UI
	// and the Android app render the message as Markdown.
	ExtrasDisplay = "client::display"
	// ExtrasNotification carries {"click": {"url": …}}: the Android app
	// opens the URL when the notification is tapped.
	ExtrasNotification = "client::notification"
)

// extras is the message's extras, typed (not a map) so that a message is
// encoded without reflection over maps: every delivery builds one. The tags
// must stay ExtrasDisplay and ExtrasNotification.
type extras struct {
	Display      *display      `json:"client::display,omitempty"`
	Notification *notification `json:"client::notification,omitempty"`
}

type display struct {
	ContentType string `json:"contentType"`
}

type notification struct {
	Click struct {
		URL string `json:"url"`
	} `json:"click"`
}

// payloadOf is the JSON body for msg: its Markdown when it has one (with
// the Markdown content type), else its plain body; and the board link as
// the notification's click URL when it has one.
func payloadOf(msg sinks.Message, priority int) payload {
	p := payload{Title: msg.Title, Message: msg.Body, Priority: priority}
	if msg.Markdown == "" && msg.Link == "" {
		return p
	}
	p.Extras = &extras{}
	if msg.Markdown != "" {
		p.Message = msg.Markdown
		p.Extras.Display = &display{ContentType: "text/markdown"}
	}
	if msg.Link != "" {
		p.Extras.Notification = &notification{}
		p.Extras.Notification.Click.URL = msg.Link
	}
	return p
}

// Deliver makes one attempt: POST {base}/message with the token in
// X-Gotify-Key and {title, message, priority, extras}. The message is the
// Markdown body when there is one (extras client::display contentType
// text/markdown); extras client::notification.click.url is the board link.
// Any 2xx is delivered.
func (g *Gotify) Deliver(ctx context.Context, msg sinks.Message) sinks.Result {
	if g.endpointErr != nil {
		return sinks.ErrorResult(kind, g.endpointErr)
	}
	body, err := json.Marshal(payloadOf(msg, g.cfg.Options.Priority(msg.Severity)))
	if err != nil {
		return sinks.ErrorResult(kind, fmt.Errorf("error encoding message: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, bytes.NewReader(body))
	if err != nil {
		return sinks.ErrorResult(kind, sinks.ErrInvalidURL)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Gotify-Key", g.cfg.Token.Reveal())

	resp, err := g.client.Do(req)
	if err != nil {
		return sinks.ErrorResult(kind, err)
	}
	defer sinks.Drain(resp.Body)
	return sinks.StatusResult(kind, resp, sinks.ClassifyStatus(resp.StatusCode), g.now())
}

// String names the sink by its base URL, never its token.
func (g Gotify) String() string {
	if g.cfg == nil {
		return kind + "(unconfigured)"
	}
	return kind + "(" + sinks.DisplayURL(g.cfg.BaseURL) + ")"
}

// GoString is String.
func (g Gotify) GoString() string { return g.String() }

// Format prints String for every verb, so no verb reaches the token.
func (g Gotify) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(g.String())) }

// LogValue implements slog.LogValuer.
func (g Gotify) LogValue() slog.Value { return slog.StringValue(g.String()) }
