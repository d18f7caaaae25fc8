package api

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/switchboard/notify/api/hooks"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/api/rest"
	"github.com/switchboard/notify/api/web"
)

// Options are the parts of the server beyond Deps.
type Options struct {
	// Metrics feed GET /metrics. Required.
	Metrics *ops.Metrics
	// Health answers GET /healthz. Optional.
	Health http.Handler
	// Demo serves /demo when make run's demo is on. Optional.
	Demo http.Handler
}

// NewHandler returns the whole server: every response carries the
// standard headers and every body is bounded at 16 KiB, but webhook
// deliveries at /hooks/{id}, bounded at 256 KiB.
func NewHandler(d httpx.Deps, o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", rest.New(d))
	mcp := mcpserver.New(d)
	mux.Handle("/mcp", StreamingRoute(mcp))
	mux.Handle("/mcp/", StreamingRoute(mcp))
	opsHandler := ops.New(d, o.Metrics)
	mux.Handle("GET /ops/actors", opsHandler)
	mux.Handle("GET /metrics", opsHandler)
	if o.Health != nil {
		mux.Handle("GET /healthz", o.Health)
	}
	if o.Demo != nil {
		mux.Handle("/demo", o.Demo)
		mux.Handle("/demo/", o.Demo)
	}
	mux.Handle("/", web.New(d))
	// Webhook deliveries have their own body bound (256 KiB), so they sit
	// beside the 16 KiB limit of every management route, not under it.
	root := http.NewServeMux()
	root.Handle("/hooks/", hooks.New(d))
	root.Handle("/", httpx.LimitBody(mux))
	return httpx.Headers(root)
}

// Server defaults (each a setting of the binary, D27).
const (
	// ReadTimeoutDefault bounds reading one request, headers and body: a
	// client that sends a body one byte at a time is cut off.
	ReadTimeoutDefault = 30 * time.Second
	// ReadHeaderTimeoutMax bounds reading the headers (at most the read
	// timeout).
	ReadHeaderTimeoutMax = 10 * time.Second
	// WriteTimeoutDefault bounds a response on every route but /mcp, from
	// the end of the request's headers (a send test takes at most 10 s).
	WriteTimeoutDefault = 30 * time.Second
	// IdleTimeoutDefault is how long a kept-alive connection may wait for
	// its next request.
	IdleTimeoutDefault = 60 * time.Second
	// MaxConnsDefault bounds the connections served at once; more wait in
	// the kernel's backlog.
	MaxConnsDefault = 1000
	// PressureIdleTimeoutDefault is the idle timeout while the server is
	// under pressure (PressureConns open).
	PressureIdleTimeoutDefault = time.Second
	// BodyMinRateDefault is the slowest a request body may arrive, in
	// bytes a second on average, once its grace is over.
	BodyMinRateDefault = 1024
	// BodyGraceDefault is how long a request body may take before
	// BodyMinRate applies (under pressure: PressureIdleTimeout, when
	// shorter).
	BodyGraceDefault = 5 * time.Second
)

// ServerConfig are the HTTP server's operator bounds. The zero value of
// every field means its default.
type ServerConfig struct {
	// ReadTimeout bounds reading a request (headers and body). Defaults to
	// ReadTimeoutDefault (30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, except on /mcp, whose
	// streams last as long as the client keeps them (StreamingRoute).
	// Defaults to WriteTimeoutDefault (30 s).
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection idle this long. Defaults
	// to IdleTimeoutDefault (60 s).
	IdleTimeout time.Duration
	// MaxConns bounds concurrent connections. Defaults to MaxConnsDefault
	// (1000).
	MaxConns int
	// MaxConnsPerClient bounds the connections of one client IP: one past
	// it is closed as soon as it is accepted. Defaults to an eighth of
	// MaxConns (125), at least 1.
	MaxConnsPerClient int
	// PressureConns is how many open connections put the server under
	// pressure: then a connection idle for PressureIdleTimeout is closed.
	// Defaults to three quarters of MaxConns (750), at least 1.
	PressureConns int
	// PressureIdleTimeout is the idle timeout under pressure. Defaults to
	// PressureIdleTimeoutDefault (1 s). It is also a body's grace under
	// pressure (when shorter than BodyGrace) and how long a connection in
	// the reserve has to present a valid credential; a connection is a
	// quarter of it old before a newcomer may take its slot (Server).
	PressureIdleTimeout time.Duration
	// ReservedConns are the last connections of MaxConns kept for clients
	// that present a valid credential: while more than MaxConns minus
	// them are open, connections that presented none for
	// PressureIdleTimeout are closed, oldest first. Defaults to a tenth
	// of MaxConns (100); negative keeps none.
	ReservedConns int
	// BodyMinRate is the slowest a request body may arrive once BodyGrace
	// is over, in bytes a second on average. Defaults to
	// BodyMinRateDefault (1 KiB/s).
	BodyMinRate int
	// BodyGrace is how long a request body may take before BodyMinRate
	// applies. Defaults to BodyGraceDefault (5 s).
	BodyGrace time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header names the client (httpx.ResolveClient); their
	// connections are not held to MaxConnsPerClient. Defaults to none.
	TrustedProxies httpx.Proxies
	// ErrorLog receives the server's own errors. Defaults to the standard
	// logger.
	ErrorLog *log.Logger
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c ServerConfig) WithDefaults() ServerConfig {
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.MaxConns = cmp.Or(c.MaxConns, MaxConnsDefault)
	c.MaxConnsPerClient = cmp.Or(c.MaxConnsPerClient, max(1, c.MaxConns/8))
	c.PressureConns = cmp.Or(c.PressureConns, max(1, c.MaxConns*3/4))
	c.PressureIdleTimeout = cmp.Or(c.PressureIdleTimeout, PressureIdleTimeoutDefault)
	c.ReservedConns = cmp.Or(c.ReservedConns, c.MaxConns/10)
	if c.ReservedConns < 0 {
		c.ReservedConns = 0
	}
	c.BodyMinRate = cmp.Or(c.BodyMinRate, BodyMinRateDefault)
	c.BodyGrace = cmp.Or(c.BodyGrace, BodyGraceDefault)
	return c
}

// Server is the HTTP server with c's timeouts and connection bounds.
type Server struct {
	*http.Server
	guard *connGuard
}

// NewServer returns the HTTP server for handler with c's timeouts: idle
// keep-alive connections and slow clients are cut off, slow headers by
// the read header timeout, slow bodies by BodyMinRate after BodyGrace.
// Its Serve bounds the connections too (connGuard): at most MaxConns at
// once, at most MaxConnsPerClient from one client (an IPv6 /64), idle
// ones closed after PressureIdleTimeout while PressureConns are open, and
// ReservedConns kept for clients with a valid credential. A connection
// accepted while all MaxConns are held takes the slot of one without a
// credential still in its headers or body (the heaviest client's oldest,
// a quarter of PressureIdleTimeout old at least, at most MaxConns per
// PressureIdleTimeout: ConnsShed) rather than wait. Each request's
// client is resolved through TrustedProxies (httpx.RealClient).
func NewServer(handler http.Handler, c ServerConfig) *Server {
	c = c.WithDefaults()
	g := newConnGuard(c)
	return &Server{Server: &http.Server{
		Handler:           g.limitBodies(httpx.RealClient(c.TrustedProxies, handler)),
		ConnContext:       g.connContext,
		ReadHeaderTimeout: min(ReadHeaderTimeoutMax, c.ReadTimeout),
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          c.ErrorLog,
		ConnState:         g.connState,
	}, guard: g}
}

// Serve serves on ln under the server's connection bounds, until the
// server is closed or shut down. Call it once.
func (s *Server) Serve(ln net.Listener) error {
	go s.guard.run()
	return s.Server.Serve(&guardedListener{Listener: ln, g: s.guard})
}

// ConnsRefused is how many connections were closed at accept because
// their client held its share (MaxConnsPerClient); ConnsReaped how many
// idle ones were closed under pressure.
func (s *Server) ConnsRefused() int64 { return s.guard.refused.Load() }

// ConnsReaped: see ConnsRefused.
func (s *Server) ConnsReaped() int64 { return s.guard.reaped.Load() }

// ConnsEvicted is how many connections without a valid credential were
// closed to free the reserve (ReservedConns).
func (s *Server) ConnsEvicted() int64 { return s.guard.evicted.Load() }

// ConnsShed is how many connections without a valid credential, still
// waiting on their client, were closed at accept to make room for a new
// connection while every slot was held.
func (s *Server) ConnsShed() int64 { return s.guard.shedN.Load() }

// SlowBodies is how many requests were cut for a body slower than
// BodyMinRate.
func (s *Server) SlowBodies() int64 { return s.guard.slowBodies.Load() }

// StreamingRoute serves a route whose responses may stream for as long as
// the client keeps them open (MCP's streamable HTTP): it reads the whole
// request body under the server's read deadline (bodies are bounded), then
// lifts the read and write deadlines for this request only, so the
// server's WriteTimeout does not cut a stream and its ReadTimeout does not
// cancel the request's context mid-stream. The idle timeout and the
// connection limit still hold.
func StreamingRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "error reading request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rc := http.NewResponseController(w)
		// Errors mean the writer cannot set deadlines (a test recorder):
		// then there are none to lift.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		next.ServeHTTP(w, r)
	})
}
