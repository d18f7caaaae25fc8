package sinktest

import (
	"bytes"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/sinks"
)

// Request is what a test server received.
type Request struct {
	Method     string
	Path       string
	RawQuery   string
	RequestURI string
	Header     http.Header
	Body       []byte
}

// Server is an httptest server that records every request before handing
// it to its handler.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// NewServer starts a recording HTTP server on loopback, closed at cleanup.
// A nil handler answers 200 "{}".
func NewServer(t testing.TB, h http.HandlerFunc) *Server {
	return newServer(t, h, false)
}

// NewTLSServer starts a recording HTTPS server on loopback with
// httptest's self-signed certificate (trusted only by a client given
// CertPool), closed at cleanup.
func NewTLSServer(t testing.TB, h http.HandlerFunc) *Server {
	return newServer(t, h, true)
}

func newServer(t testing.TB, h http.HandlerFunc, tls bool) *Server {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }
	}
	s := &Server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading body", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{
			Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, RequestURI: r.RequestURI,
			Header: r.Header.Clone(), Body: body,
		})
		s.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	// The server's own complaints (a client that rejected its certificate)
	// are not under test; keep them out of the test output.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// CertPool is a pool trusting a TLS server's certificate.
func (s *Server) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

// LoopbackPrefixes are the loopback ranges, v4 and v6: the allowlist a
// client needs to reach a test server.
func LoopbackPrefixes() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// Guard is a guard configuration that reaches the test servers: plain
// HTTP allowed and loopback allowlisted.
func Guard() sinks.GuardConfig {
	return sinks.GuardConfig{AllowHTTP: true, AllowedPrefixes: LoopbackPrefixes()}
}

// Client returns sinks.NewClient(cfg), its idle connections closed at
// cleanup (so goleak sees no stray connection goroutines).
func Client(t testing.TB, cfg sinks.GuardConfig) *http.Client {
	c := sinks.NewClient(cfg)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// RefusedURL is an http:// base URL on loopback where nothing listens, for
// as long as the test runs: its port is held by a socket that is bound but
// never listens (a connection to it is refused), closed when the test
// ends. A port found free by listening and closing again could be handed
// to another test's server meanwhile: ci3 of session 6 saw
// TestDeliveryNeverLeaksSecrets' "refused" sink deliver to
// TestDeliveryTwoInstances' Gotify, both of them failing.
func RefusedURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	in4, ok := sa.(*syscall.SockaddrInet4)
	require.True(t, ok, "%T", sa)
	return "http://127.0.0.1:" + strconv.Itoa(in4.Port)
}
