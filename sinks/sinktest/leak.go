package sinktest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/sinks"
)

// Canaries are the secret values a leak test plants: each carries a marker
// unique to the test, and the check looks for every marker (and every value
// whole) in everything captured.
type Canaries struct {
	// GotifyToken is shaped like a Gotify application token.
	GotifyToken string
	// AppriseURLs are Apprise URLs whose credentials are canaries; their
	// hosts are public addresses, so the send-time check of the hosts
	// inside Apprise URLs needs no DNS.
	AppriseURLs []string
	// Authorization is an Authorization header value.
	Authorization string
	// MessageBody is a message body; REQ-15 keeps it out of logs and
	// errors too.
	MessageBody string

	markers []string
}

// NewCanaries makes canaries with fresh random markers.
func NewCanaries() Canaries {
	m := func() string {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return "cnry" + hex.EncodeToString(b)
	}
	tok, bot, pw, auth, body := m(), m(), m(), m(), m()
	return Canaries{
		GotifyToken:   "gtfya." + tok,
		AppriseURLs:   []string{"tgram://" + bot + "/123456789", "mailto://user:" + pw + "@93.184.216.34?to=ops@example.net"},
		Authorization: "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:"+auth)),
		MessageBody:   "Sender wrote: " + body,
		markers:       []string{tok, bot, pw, auth, body},
	}
}

// Values are the strings none of which may appear in captured output.
func (c Canaries) Values() []string {
	v := append([]string{c.GotifyToken, c.Authorization, c.MessageBody}, c.AppriseURLs...)
	// The Authorization's base64 hides its marker; look for the encoded
	// credential too.
	if _, cred, ok := strings.Cut(c.Authorization, " "); ok {
		v = append(v, cred)
	}
	return append(v, c.markers...)
}

// Capture collects everything a leak could reach: every byte written
// through its slog handlers (JSON and text), the printed forms of values,
// and every error in a chain.
type Capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// String is everything captured.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Logger logs, at every level, through a JSON and a text handler both
// writing to the capture.
func (c *Capture) Logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	return slog.New(slog.NewMultiHandler(slog.NewJSONHandler(c, opts), slog.NewTextHandler(c, opts)))
}

// Record prints each value in every way a careless caller might: %v, %+v,
// %#v, %s, JSON, and, for an error, every error of its chain.
func (c *Capture) Record(vs ...any) {
	for _, v := range vs {
		fmt.Fprintf(c, "%v\n%+v\n%#v\n%s\n", v, v, v, v)
		if b, err := json.Marshal(v); err == nil {
			_, _ = c.Write(append(b, '\n'))
		}
		if err, ok := v.(error); ok {
			c.recordChain(err)
		}
	}
}

func (c *Capture) recordChain(err error) {
	for err != nil {
		fmt.Fprintf(c, "%s\n%+v\n%#v\n", err.Error(), err, err)
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				c.recordChain(e)
			}
			return
		default:
			err = errors.Unwrap(err)
		}
	}
}

// RecordResult logs a result the way the outbox worker does (REQ-15:
// sink, class, status, error) and records it and its error.
func (c *Capture) RecordResult(sink any, r sinks.Result) {
	c.Logger().Error("sink delivery failed", "sink", sink, "class", r.Class, "status", r.Status,
		"retry_after", r.RetryAfter, "err", r.Err, "result", r)
	c.Record(r, r.Err)
}

// RequireNoLeak fails the test if any canary value appears in what c
// captured.
func RequireNoLeak(t testing.TB, canaries Canaries, c *Capture) {
	t.Helper()
	got := c.String()
	require.NotEmpty(t, got, "nothing was captured: the leak check would prove nothing")
	for _, v := range canaries.Values() {
		require.NotContains(t, got, v, "a planted secret leaked")
	}
}
