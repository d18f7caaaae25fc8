package sinktest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// DeliverySuite is the conformance suite every HTTP sink adapter runs:
// one delivery per case against a real loopback server (or none), the
// class the adapter must report, and the leak check on each.
type DeliverySuite struct {
	// New builds the adapter under test for a sink at base, planting the
	// canaries in its configuration (token, URLs, authorization).
	New func(base string, c Canaries, client *http.Client) sinks.Adapter

	// Statuses maps HTTP statuses the adapter treats its own way to the
	// class it must report; they are added to, or replace, the shared
	// ones.
	Statuses map[int]notifytype.ErrorClass
}

// sharedStatuses are the answers every adapter classifies alike (D11).
var sharedStatuses = map[int]notifytype.ErrorClass{
	http.StatusOK:                  notifytype.ClassNone,
	http.StatusMovedPermanently:    notifytype.ClassRedirect,
	http.StatusBadRequest:          notifytype.ClassRejected,
	http.StatusUnauthorized:        notifytype.ClassAuth,
	http.StatusForbidden:           notifytype.ClassAuth,
	http.StatusNotFound:            notifytype.ClassRejected,
	http.StatusTooManyRequests:     notifytype.ClassRejected,
	http.StatusInternalServerError: notifytype.ClassServer,
	http.StatusBadGateway:          notifytype.ClassServer,
	http.StatusServiceUnavailable:  notifytype.ClassServer,
}

// Message is the message the suite delivers; its body is the canary's.
func Message(c Canaries) sinks.Message {
	return sinks.Message{Title: "[todo.dead_lettered] forge: suite", Body: c.MessageBody, Severity: notifytype.SeverityHigh}
}

// echo answers with status and a body repeating the request's headers and
// body, as a verbose server might: nothing of it may reach a result.
func echo(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := fmt.Sprintf(`{"error": "echo", "url": %q, "headers": %q, "body": %q}`, r.URL.String(), r.Header, readAll(r))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Headers", fmt.Sprint(r.Header))
		switch status {
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "120")
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func readAll(r *http.Request) string {
	b := make([]byte, 4096)
	n, _ := r.Body.Read(b)
	return string(b[:n])
}

// Run runs every case as a parallel subtest.
func (s DeliverySuite) Run(t *testing.T) {
	t.Helper()
	statuses := map[int]notifytype.ErrorClass{}
	for code, class := range sharedStatuses {
		statuses[code] = class
	}
	for code, class := range s.Statuses {
		statuses[code] = class
	}

	for code, class := range statuses {
		name := string(class)
		if class == notifytype.ClassNone {
			name = "delivered"
		}
		t.Run(fmt.Sprintf("status %d is %s", code, name), func(t *testing.T) {
			t.Parallel()
			canaries := NewCanaries()
			srv, target := NewServer(t, echo(code)), NewServer(t, nil)
			if code >= 300 && code <= 399 {
				srv = NewServer(t, func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, target.URL+"/elsewhere", code)
				})
			}
			r := s.deliver(t, canaries, srv.URL, Client(t, Guard()))
			require.Empty(t, target.Requests(), "a redirect was followed")
			require.Equal(t, class, r.Class)
			require.Equal(t, code, r.Status)
			require.Len(t, srv.Requests(), 1)
			switch {
			case class == notifytype.ClassNone:
				require.NoError(t, r.Err)
			case code == http.StatusServiceUnavailable:
				require.Equal(t, 120*time.Second, r.RetryAfter)
			case code == http.StatusTooManyRequests:
				require.InDelta(t, time.Hour.Seconds(), r.RetryAfter.Seconds(), 5)
			default:
				require.Zero(t, r.RetryAfter)
			}
			if class != notifytype.ClassNone {
				require.Error(t, r.Err)
				require.Contains(t, r.Err.Error(), fmt.Sprint(code))
			}
		})
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		srv := NewServer(t, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // answer nothing until the client gives up
		})
		cfg := Guard()
		cfg.Timeout = 200 * time.Millisecond
		r := s.deliver(t, NewCanaries(), srv.URL, Client(t, cfg))
		require.Equal(t, notifytype.ClassTimeout, r.Class, "%v", r.Err)
		require.Zero(t, r.Status)
	})

	t.Run("context deadline", func(t *testing.T) {
		t.Parallel()
		srv := NewServer(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		canaries := NewCanaries()
		client := Client(t, Guard())
		a := s.New(srv.URL, canaries, client)
		r := a.Deliver(ctx, Message(canaries))
		requireLeakFree(t, canaries, a, r)
		require.Equal(t, notifytype.ClassTimeout, r.Class, "%v", r.Err)
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		r := s.deliver(t, NewCanaries(), RefusedURL(t), Client(t, Guard()))
		require.Equal(t, notifytype.ClassNetwork, r.Class, "%v", r.Err)
	})

	t.Run("untrusted certificate", func(t *testing.T) {
		t.Parallel()
		srv := NewTLSServer(t, nil)
		r := s.deliver(t, NewCanaries(), srv.URL, Client(t, Guard()))
		require.Equal(t, notifytype.ClassTLS, r.Class, "%v", r.Err)
		require.Empty(t, srv.Requests())
	})

	t.Run("trusted certificate", func(t *testing.T) {
		t.Parallel()
		srv := NewTLSServer(t, nil)
		cfg := Guard()
		cfg.AllowHTTP = false
		cfg.RootCAs = srv.CertPool()
		r := s.deliver(t, NewCanaries(), srv.URL, Client(t, cfg))
		require.True(t, r.OK(), "%v", r.Err)
		require.Len(t, srv.Requests(), 1)
	})

	t.Run("loopback without the allowlist is blocked", func(t *testing.T) {
		t.Parallel()
		srv := NewServer(t, nil)
		r := s.deliver(t, NewCanaries(), srv.URL, Client(t, sinks.GuardConfig{AllowHTTP: true}))
		require.Equal(t, notifytype.ClassBlocked, r.Class, "%v", r.Err)
		require.Empty(t, srv.Requests())
	})

	t.Run("http without the opt-in is blocked", func(t *testing.T) {
		t.Parallel()
		srv := NewServer(t, nil)
		cfg := Guard()
		cfg.AllowHTTP = false
		r := s.deliver(t, NewCanaries(), srv.URL, Client(t, cfg))
		require.Equal(t, notifytype.ClassBlocked, r.Class, "%v", r.Err)
		require.ErrorIs(t, r.Err, sinks.ErrInsecureScheme)
		require.Empty(t, srv.Requests())
	})

	t.Run("malformed base URL is blocked", func(t *testing.T) {
		t.Parallel()
		canaries := NewCanaries()
		r := s.deliver(t, canaries, "https://user:"+canaries.GotifyToken+"@push.example.net", Client(t, Guard()))
		require.Equal(t, notifytype.ClassBlocked, r.Class, "%v", r.Err)
		require.ErrorIs(t, r.Err, sinks.ErrInvalidURL)
	})
}

// deliver builds the adapter, delivers the canary message once and checks
// the leak-freedom of everything that came out.
func (s DeliverySuite) deliver(t *testing.T, canaries Canaries, base string, client *http.Client) sinks.Result {
	t.Helper()
	a := s.New(base, canaries, client)
	r := a.Deliver(t.Context(), Message(canaries))
	requireLeakFree(t, canaries, a, r)
	return r
}

func requireLeakFree(t *testing.T, canaries Canaries, a sinks.Adapter, r sinks.Result) {
	t.Helper()
	var c Capture
	c.RecordResult(a, r)
	c.Record(a)
	RequireNoLeak(t, canaries, &c)
}
