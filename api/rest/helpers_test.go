package rest_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/rest"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/store/storetest"
)

// bundle is what a test of the API acts on: a world (database, factory,
// operator key, captured logs), a real engine, the reference host's
// accounts and endpoints, and the API served by an httptest server. Every
// response body is kept, for the leak test.
type bundle struct {
	w        *hosttest.World
	eng      *engine.Engine
	accounts *host.Accounts
	todos    *host.Todos
	webhooks *host.Webhooks
	srv      *httptest.Server

	mu     sync.Mutex
	bodies []string
}

// options edit what setup builds.
type options struct {
	limiter   *httpx.Limiter
	configure []func(*engine.Config)
}

// setup builds a bundle. The engine is the world's: reference directory, a
// 32-byte operator key, plain HTTP allowed and 127.0.0.0/8 allowlisted so
// that httptest stand-ins are reachable.
func setup(t *testing.T, opts ...func(*options)) *bundle {
	t.Helper()
	o := options{limiter: httpx.NewLimiter(1000, 1000)}
	for _, f := range opts {
		f(&o)
	}
	w := hosttest.NewWorld(t)
	eng := w.Engine(o.configure...)
	dir := host.NewDirectory(w.Pool)
	todos := host.NewTodos(w.Pool, eng, w.Clock)
	accounts := host.NewAccounts(w.Pool)
	endpoints := host.NewEndpoints(w.Pool, dir, todos, w.Clock)
	webhooks := host.NewWebhooks(host.WebhooksConfig{Pool: w.Pool, Emitter: eng, SecretKey: w.Key, Clock: w.Clock})
	deps := httpx.Deps{
		Engine: eng, Digests: digests.New(eng, digests.Config{}), Accounts: accounts, Endpoints: endpoints, Todos: todos, Webhooks: webhooks, Pool: w.Pool,
		Auth:    &httpx.Auth{Accounts: accounts, Endpoints: endpoints, Clock: w.Clock},
		Limiter: o.limiter,
		Logger:  slog.New(slog.NewJSONHandler(w.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:   w.Clock,
		BaseURL: "https://switchboard.example.net",
	}
	srv := httptest.NewServer(rest.New(deps))
	t.Cleanup(srv.Close)
	return &bundle{w: w, eng: eng, accounts: accounts, todos: todos, webhooks: webhooks, srv: srv}
}

// human creates a human and returns its id and an operator API token.
func (b *bundle) human(t *testing.T) (int64, string) {
	t.Helper()
	h, err := b.accounts.CreateHuman(b.w.Ctx, "human", "h-"+strings.ToLower(rand.Text()[:10])+"@example.test")
	require.NoError(t, err)
	tok, err := b.accounts.MintAPIToken(b.w.Ctx, h.ID)
	require.NoError(t, err)
	return h.ID, tok.Reveal()
}

// response is one answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

// apiError is the error shape every refusal has.
type apiError struct {
	Code    string `json:"code"`
	Field   string `json:"field"`
	Scheme  string `json:"scheme"`
	Message string `json:"message"`
}

// err decodes the response's error.
func (r response) err(t *testing.T) apiError {
	t.Helper()
	var v struct {
		Error apiError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &v), "%s", r.body)
	return v.Error
}

// into decodes the response into v.
func (r response) into(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "%s", r.body)
}

// do sends a request with token (none when empty). body is nil for none,
// a string or []byte as is, anything else as JSON.
func (b *bundle) do(t *testing.T, token, method, path string, body any) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(b.w.Ctx, method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	b.mu.Lock()
	b.bodies = append(b.bodies, string(got))
	b.mu.Unlock()
	return response{status: res.StatusCode, header: res.Header, body: got}
}

// ok sends a request and requires status want, returning the response.
func (b *bundle) ok(t *testing.T, want int, token, method, path string, body any) response {
	t.Helper()
	r := b.do(t, token, method, path, body)
	require.Equal(t, want, r.status, "%s %s: %s", method, path, r.body)
	return r
}

// refused sends a request and requires a refusal of status and code,
// returning the error.
func (b *bundle) refused(t *testing.T, status int, code, token, method, path string, body any) apiError {
	t.Helper()
	r := b.do(t, token, method, path, body)
	require.Equal(t, status, r.status, "%s %s: %s", method, path, r.body)
	e := r.err(t)
	require.Equal(t, code, e.Code, "%s %s: %s", method, path, r.body)
	requireHeaders(t, r)
	return e
}

// allBodies returns every response body so far.
func (b *bundle) allBodies() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.bodies, "\n")
}

// count counts a table's rows.
func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	return b.w.F.Count(`SELECT count(*) FROM ` + storetest.Table(table))
}

// counts counts the rows of what the management routes write.
func (b *bundle) counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"connections", "sinks", "subscriptions", "endpoints", "delivery_records"} {
		out[table] = b.count(t, table)
	}
	return out
}

// requireHeaders checks the standard headers and a JSON body (a 204 has
// none).
func requireHeaders(t *testing.T, r response) {
	t.Helper()
	h := r.header
	require.Equal(t, httpx.ContentSecurityPolicy, h.Get("Content-Security-Policy"))
	require.Equal(t, "DENY", h.Get("X-Frame-Options"))
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.Equal(t, "strict-origin-when-cross-origin", h.Get("Referrer-Policy"))
	if r.status != http.StatusNoContent && !strings.HasSuffix(h.Get("Content-Type"), "yaml") {
		require.Equal(t, "application/json", h.Get("Content-Type"))
		require.True(t, json.Valid(r.body), "%s", r.body)
	}
}

// gotify is a Gotify stand-in answering status and recording messages.
type gotify struct {
	*httptest.Server
	mu       sync.Mutex
	messages []gotifyMessage
}

type gotifyMessage struct {
	Title string `json:"title"`
	Token string `json:"-"`
	Query string `json:"-"`
}

func newGotify(t *testing.T, status int) *gotify {
	t.Helper()
	g := &gotify{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m gotifyMessage
		_ = json.NewDecoder(r.Body).Decode(&m)
		m.Token, m.Query = r.Header.Get("X-Gotify-Key"), r.URL.RawQuery
		g.mu.Lock()
		g.messages = append(g.messages, m)
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gotify) received() []gotifyMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gotifyMessage(nil), g.messages...)
}

// idOf is the "id" of a created resource.
func idOf(t *testing.T, r response) int64 {
	t.Helper()
	var v struct {
		ID int64 `json:"id"`
	}
	r.into(t, &v)
	require.Positive(t, v.ID, "%s", r.body)
	return v.ID
}

// connection creates a Gotify connection through the API for owner
// ("" for the caller's own scope) and returns its id.
func (b *bundle) connection(t *testing.T, token, owner, baseURL string) int64 {
	t.Helper()
	body := map[string]any{"kind": "gotify", "name": "gotify-" + rand.Text()[:8], "base_url": baseURL, "token": "gtfya.test-token"}
	if owner != "" {
		body["owner"] = owner
	}
	return idOf(t, b.ok(t, http.StatusCreated, token, "POST", "/api/v1/connections", body))
}

// sink creates a Gotify sink on conn through the API and returns its id.
func (b *bundle) sink(t *testing.T, token, owner string, conn int64) int64 {
	t.Helper()
	body := map[string]any{"kind": "gotify", "name": "sink-" + rand.Text()[:8], "connection_id": conn}
	if owner != "" {
		body["owner"] = owner
	}
	return idOf(t, b.ok(t, http.StatusCreated, token, "POST", "/api/v1/sinks", body))
}

// subscription adds a dead-letter subscription to sink and returns its id.
func (b *bundle) subscription(t *testing.T, token string, sink int64) int64 {
	t.Helper()
	return idOf(t, b.ok(t, http.StatusCreated, token, "POST", sinkPath(sink, "/subscriptions"),
		map[string]any{"event_types": []string{"todo.dead_lettered"}}))
}

// vended is POST /endpoints's answer.
type vended struct {
	Endpoint struct {
		ID     int64    `json:"id"`
		Owner  string   `json:"owner"`
		Grants []string `json:"grants"`
	} `json:"endpoint"`
	Credential string `json:"credential"`
}

// vend vends an endpoint of owner with grants (nil: none named) and
// returns its id and credential.
func (b *bundle) vend(t *testing.T, token, owner string, grants []string) (int64, string) {
	t.Helper()
	body := map[string]any{"owner": owner, "name": "agent-" + rand.Text()[:8]}
	if grants != nil {
		body["grants"] = grants
	}
	var v vended
	b.ok(t, http.StatusCreated, token, "POST", "/api/v1/endpoints", body).into(t, &v)
	require.Positive(t, v.Endpoint.ID)
	return v.Endpoint.ID, v.Credential
}

func sinkPath(id int64, rest string) string {
	return "/api/v1/sinks/" + strconv.FormatInt(id, 10) + rest
}

func human(id int64) string { return fmt.Sprintf("human:%d", id) }
func team(id int64) string  { return fmt.Sprintf("team:%d", id) }
