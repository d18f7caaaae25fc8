package cairn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

const kind = "cairn"

// Client publishes artifacts to one Cairn server. It is safe for
// concurrent use and prints without its token.
type Client struct {
	cfg    *Config
	client *http.Client
}

// New returns a client for cfg sending through client, which should be the
// guarded client (sinks.NewClient).
func New(cfg Config, client *http.Client) *Client {
	cfg = cfg.WithDefaults()
	return &Client{cfg: &cfg, client: client}
}

// Artifact is what the server answered for a published artifact.
type Artifact struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Error is a failed request: its class (D11) and the HTTP status, if the
// server answered. Its text carries neither the token nor a body.
type Error struct {
	Class  notifytype.ErrorClass
	Status int
	// Err says what failed, redacted.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ClassOf is the error class of an error Publish or MaxTTL returned.
func ClassOf(err error) notifytype.ErrorClass {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Class
	}
	if err == nil {
		return notifytype.ClassNone
	}
	return notifytype.ClassNetwork
}

type limits struct {
	MaxTTLSeconds int64 `json:"max_ttl_seconds"`
}

// MaxTTL asks the server for the longest TTL it allows; zero when it sets
// none.
func (c *Client) MaxTTL(ctx context.Context) (time.Duration, error) {
	var l limits
	if err := c.do(ctx, http.MethodGet, "limits", nil, http.StatusOK, &l); err != nil {
		return 0, err
	}
	if l.MaxTTLSeconds < 0 {
		return 0, &Error{Class: notifytype.ClassRejected, Err: errors.New("error reading cairn limits: negative max_ttl_seconds")}
	}
	return time.Duration(l.MaxTTLSeconds) * time.Second, nil
}

type artifactRequest struct {
	Name        string   `json:"name"`
	ContentType string   `json:"content_type"`
	Content     string   `json:"content"`
	TTLSeconds  int64    `json:"ttl_seconds"`
	Tags        []string `json:"tags"`
}

// Publish publishes content as a Markdown artifact named name, tagged
// switchboard-digest, with the configured TTL capped at the server's
// maximum (GET /v1/limits first).
func (c *Client) Publish(ctx context.Context, name, content string) (Artifact, error) {
	if len(content) > MaxContentBytes {
		return Artifact{}, &Error{Class: notifytype.ClassRejected, Err: fmt.Errorf("error publishing to cairn: content is over %d bytes", MaxContentBytes)}
	}
	ttl := c.cfg.TTL
	maxTTL, err := c.MaxTTL(ctx)
	if err != nil {
		return Artifact{}, err
	}
	if maxTTL > 0 && ttl > maxTTL {
		ttl = maxTTL
	}
	req := artifactRequest{
		Name: name, ContentType: ContentType, Content: content,
		TTLSeconds: int64(ttl / time.Second), Tags: []string{TagDigest},
	}
	var a Artifact
	if err := c.do(ctx, http.MethodPost, "artifacts", req, http.StatusCreated, &a); err != nil {
		return Artifact{}, err
	}
	if a.URL == "" {
		return Artifact{}, &Error{Class: notifytype.ClassRejected, Err: errors.New("error publishing to cairn: the answer has no url")}
	}
	if u, err := sinks.ParseBaseURL(a.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return Artifact{}, &Error{Class: notifytype.ClassRejected, Err: errors.New("error publishing to cairn: the answer's url is not an http(s) URL")}
	}
	return a, nil
}

func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	endpoint, err := sinks.Endpoint(c.cfg.BaseURL, "v1", path)
	if err != nil {
		return c.fail(err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return &Error{Class: notifytype.ClassRejected, Err: fmt.Errorf("error encoding cairn request: %w", err)}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint.String(), rd)
	if err != nil {
		return c.fail(sinks.ErrInvalidURL)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token.Reveal())
	resp, err := c.client.Do(req)
	if err != nil {
		return c.fail(err)
	}
	defer sinks.Drain(resp.Body)
	if resp.StatusCode != want {
		class := sinks.ClassifyStatus(resp.StatusCode)
		if class == notifytype.ClassNone {
			class = notifytype.ClassRejected
		}
		return &Error{Class: class, Status: resp.StatusCode,
			Err: fmt.Errorf("error calling cairn %s: server answered %d %s (%s)", path, resp.StatusCode, http.StatusText(resp.StatusCode), class)}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, sinks.MaxDrain)).Decode(out); err != nil {
		return &Error{Class: notifytype.ClassRejected, Status: resp.StatusCode, Err: fmt.Errorf("error reading cairn %s answer: not the expected JSON", path)}
	}
	return nil
}

func (c *Client) fail(err error) error {
	class := sinks.ClassifyError(err)
	return &Error{Class: class, Err: fmt.Errorf("error calling cairn (%s): %w", class, sinks.RedactError(err))}
}

// String names the server by its base URL, never its token.
func (c Client) String() string {
	if c.cfg == nil {
		return kind + "(unconfigured)"
	}
	return kind + "(" + sinks.DisplayURL(c.cfg.BaseURL) + ")"
}

// GoString is String.
func (c Client) GoString() string { return c.String() }

// Format prints String for every verb, so no verb reaches the token.
func (c Client) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue implements slog.LogValuer.
func (c Client) LogValue() slog.Value { return slog.StringValue(c.String()) }
