package faults

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// SlowProxy forwards requests to a receiver, holding the first until
// release is closed: a send that is in flight for as long as a test needs.
type SlowProxy struct {
	URL string
	// Arrived is closed when the first request arrives.
	Arrived chan struct{}
}

// NewSlowProxy starts a proxy to target, closed at cleanup.
func NewSlowProxy(t testing.TB, target string, release <-chan struct{}) *SlowProxy {
	t.Helper()
	p := &SlowProxy{Arrived: make(chan struct{})}
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true; close(p.Arrived) })
		if first {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, "upstream failed", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}
