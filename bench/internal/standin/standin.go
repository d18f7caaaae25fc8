// Package standin is the receiver every bench driver posts to: a
// Gotify-shaped httptest server on loopback that answers 200 with a
// message id to POST /message, and counts what it received by sender key
// (X-Gotify-Key) and body, so that a driver can tell a message received
// twice from two messages.
package standin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Server is the stand-in.
type Server struct {
	*httptest.Server
	got   atomic.Int64
	first atomic.Int64 // unix nanoseconds of the first request received since the last Reset
	last  atomic.Int64 // unix nanoseconds of the last request received
	hook  atomic.Pointer[func(key string, n int64, at time.Time)]

	mu   sync.Mutex
	seen map[[32]byte]int // by sha256(key, body): how many times received
}

// New starts a stand-in.
func New() *Server {
	s := &Server{seen: map[[32]byte]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("X-Gotify-Key")
		h := sha256.New()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write(body)
		var k [32]byte
		h.Sum(k[:0])
		s.mu.Lock()
		s.seen[k]++
		s.mu.Unlock()
		n := s.got.Add(1)
		s.first.CompareAndSwap(0, at.UnixNano())
		s.last.Store(at.UnixNano())
		if f := s.hook.Load(); f != nil {
			(*f)(key, n, at)
		}
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"id":1}`))
	}))
	return s
}

// On sets what each request reports to: its sender key, the count
// received since the last Reset, and when it arrived (on entering the
// handler). nil: nothing. It runs on the handler's goroutine.
func (s *Server) On(f func(key string, n int64, at time.Time)) {
	if f == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&f)
}

// Reset forgets every message received.
func (s *Server) Reset() {
	s.mu.Lock()
	s.seen = map[[32]byte]int{}
	s.mu.Unlock()
	s.got.Store(0)
	s.first.Store(0)
}

// First is when the first request since the last Reset arrived (zero:
// none yet).
func (s *Server) First() time.Time {
	if t := s.first.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// Got is how many requests arrived since the last Reset.
func (s *Server) Got() int64 { return s.got.Load() }

// Counts reports the distinct messages received since the last Reset and
// how many of them arrived more than once.
func (s *Server) Counts() (distinct, duplicated int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.seen {
		distinct++
		if n > 1 {
			duplicated++
		}
	}
	return distinct, duplicated
}

// WaitFor waits until n requests arrived since the last Reset and returns
// when the n-th arrived.
func (s *Server) WaitFor(ctx context.Context, n int64, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for s.got.Load() < n {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d messages received within %v", s.got.Load(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return time.Unix(0, s.last.Load()), nil
}

// Client is a net/http client with keep-alive and room for conc idle
// connections to the stand-in.
func Client(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(conc, 2)
	t.MaxIdleConns = max(conc, 100)
	return &http.Client{Transport: t, Timeout: 10 * time.Second}
}

// Post sends one message as the engine's Gotify adapter does: POST
// {base}/message, JSON, the application key in X-Gotify-Key.
func Post(ctx context.Context, c *http.Client, base, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/message", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Gotify-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stand-in answered %d", resp.StatusCode)
	}
	return nil
}
