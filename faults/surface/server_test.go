package surface_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// The operator API's per-human limit as serve sets it
// (cmd/switchboard-notify/serve.go: apiRatePerSecond, apiBurst).
const (
	serveRatePerSecond = 5
	serveBurst         = 30
)

// server is the whole handler as serve builds it, over a serving engine.
type server struct {
	w    *hosttest.World
	eng  *engine.Engine
	deps httpx.Deps
	url  string

	mu     sync.Mutex
	bodies []string // every response body the test read
}

type serverOpts struct {
	// realClock serves the engine on the wall clock (rows inserted with the
	// database's now() fall due); otherwise the world's fake clock.
	realClock bool
	// limiter defaults to one that never limits.
	limiter *httpx.Limiter
	// wrapAdapters, when set, wraps every adapter the engine builds
	// (testhooks.WrapAdapters).
	wrapAdapters func(sinkID int64, a sinks.Adapter) sinks.Adapter
}

func newServer(t testing.TB, o serverOpts) *server {
	t.Helper()
	w := hosttest.NewWorld(t)
	var clock clocks.Clock = w.Clock
	var metrics *ops.Metrics
	var prepare func(*engine.Engine)
	if o.wrapAdapters != nil {
		prepare = func(e *engine.Engine) { testhooks.WrapAdapters(e, o.wrapAdapters) }
	}
	eng := w.ServeWith(prepare, func(c *engine.Config) {
		c.MaxSinksPerScope = 20
		if o.realClock {
			c.Clock = clockwork.NewRealClock()
			testhooks.SetDatabaseClock(c, nil) // the database's own clock, as in production
			clock = clocks.System{}
		}
		inner := c.OnAttempt
		c.OnAttempt = func(a engine.Attempt) { metrics.OnAttempt(a); inner(a) }
		c.OnClaim = func(sink int64, lag time.Duration) { metrics.OnClaim(sink, lag) }
	})
	// The API's pool is sized as the server binary sizes its own
	// (store.ApplyPoolDefaults), not pgxpool's default of four on a
	// two-core machine: row 6d measured that pool's queue.
	pc, err := pgxpool.ParseConfig(w.URL)
	require.NoError(t, err)
	store.ApplyPoolDefaults(pc, w.URL)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	metrics = ops.NewMetrics(pool, eng.AllSinkStatuses)
	if o.limiter == nil {
		o.limiter = httpx.NewLimiter(1e6, 1e6)
	}
	accounts := host.NewAccounts(pool)
	todos := host.NewTodos(pool, eng, clock)
	deps := httpx.Deps{
		Engine: eng, Digests: digests.New(eng, digests.Config{}), Accounts: accounts, Endpoints: host.NewEndpoints(pool, host.NewDirectory(pool), todos, clock),
		Todos: todos, Pool: pool, Limiter: o.limiter,
		Webhooks: host.NewWebhooks(host.WebhooksConfig{Pool: pool, Emitter: eng, SecretKey: w.Key, Clock: clock}),
		Logger:   slog.New(slog.NewJSONHandler(w.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:    clock, BaseURL: "http://127.0.0.1",
	}
	deps.Auth = &httpx.Auth{Accounts: accounts, Endpoints: deps.Endpoints, Clock: clock}
	srv := httptest.NewServer(api.NewHandler(deps, api.Options{Metrics: metrics}))
	t.Cleanup(srv.Close)
	return &server{w: w, eng: eng, deps: deps, url: srv.URL}
}

// person is a human with an operator API token.
type person struct {
	id    int64
	scope notifytype.OwnerScope
	token string
}

func (s *server) person(t testing.TB) person {
	t.Helper()
	h, err := s.deps.Accounts.CreateHuman(s.w.Ctx, "Person "+rand.Text()[:4], strings.ToLower(rand.Text()[:10])+"@example.test")
	require.NoError(t, err)
	tok, err := s.deps.Accounts.MintAPIToken(s.w.Ctx, h.ID)
	require.NoError(t, err)
	return person{id: h.ID, scope: hostid.Human(h.ID), token: tok.Reveal()}
}

// request is one HTTP request of a test.
type request struct {
	method, path, token, contentType string
	body                             string
	header                           map[string]string
	client                           *http.Client
}

// do sends r and returns the status and body; the body is kept for the
// secret search.
func (s *server) do(t testing.TB, r request) (int, string) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, s.url+r.path, body)
	require.NoError(t, err)
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.contentType == "" && r.body != "" {
		r.contentType = "application/json"
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	client := r.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.mu.Unlock()
	return resp.StatusCode, string(b)
}

// api sends a JSON request with p's token and decodes a 2xx answer into
// out (when not nil), failing the test on another status.
func (s *server) api(t testing.TB, p person, method, path string, in, out any, want int) {
	t.Helper()
	var body string
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = string(b)
	}
	status, got := s.do(t, request{method: method, path: path, token: p.token, body: body})
	require.Equal(t, want, status, "%s %s: %s", method, path, got)
	if out != nil {
		require.NoError(t, json.Unmarshal([]byte(got), out), got)
	}
}

// browser logs p in through a one-time link and returns a client with its
// session cookie.
func (s *server) browser(t testing.TB, p person) *http.Client {
	t.Helper()
	link, _, err := s.deps.Accounts.MintLoginLink(s.w.Ctx, p.id)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	status, body := s.do(t, request{method: http.MethodPost, path: "/login/" + link.Reveal(), client: c, header: map[string]string{"Origin": s.url}})
	require.Equal(t, http.StatusOK, status, body)
	return c
}

// allBodies returns every response body read so far.
func (s *server) allBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// connection creates a connection through the API and returns its id.
func (s *server) connection(t testing.TB, p person, in map[string]any) int64 {
	t.Helper()
	in["owner"] = p.scope.String()
	if in["name"] == nil {
		in["name"] = "conn-" + rand.Text()[:8]
	}
	var out struct {
		ID int64 `json:"id"`
	}
	s.api(t, p, http.MethodPost, "/api/v1/connections", in, &out, http.StatusCreated)
	return out.ID
}

// sink creates a sink on a connection, subscribed to dead letters, and
// returns its id.
func (s *server) sink(t testing.TB, p person, kind string, conn int64, options any) int64 {
	t.Helper()
	in := map[string]any{"owner": p.scope.String(), "name": "sink-" + rand.Text()[:8], "kind": kind, "connection_id": conn}
	if options != nil {
		in["options"] = options
	}
	var out struct {
		ID int64 `json:"id"`
	}
	s.api(t, p, http.MethodPost, "/api/v1/sinks", in, &out, http.StatusCreated)
	s.api(t, p, http.MethodPost, fmt.Sprintf("/api/v1/sinks/%d/subscriptions", out.ID),
		map[string]any{"event_types": []string{"todo.dead_lettered"}}, nil, http.StatusCreated)
	return out.ID
}

// count returns the result of a count query.
func (s *server) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.w.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
