package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/demo"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
)

// server is the whole handler as serve builds it, over a serving engine,
// with the demo on.
type server struct {
	w         *hosttest.World
	eng       *engine.Engine
	url       string
	token     string
	humanID   int64
	receivers *demo.Receivers
	world     *demo.World
	todos     *host.Todos
	// deps and handler are what the test server serves, for a test that
	// serves them behind api.NewServer too.
	deps    httpx.Deps
	handler http.Handler
}

func newServer(t *testing.T) *server {
	t.Helper()
	w := hosttest.NewWorld(t)
	var metrics *ops.Metrics
	eng := w.Serve(func(c *engine.Config) {
		inner := c.OnAttempt
		c.OnAttempt = func(a engine.Attempt) { metrics.OnAttempt(a); inner(a) }
		c.OnClaim = func(sink int64, lag time.Duration) { metrics.OnClaim(sink, lag) }
	})
	metrics = ops.NewMetrics(w.Pool, eng.AllSinkStatuses)
	accounts := host.NewAccounts(w.Pool)
	todos := host.NewTodos(w.Pool, eng, w.Clock)
	deps := httpx.Deps{
		Engine: eng, Digests: digests.New(eng, digests.Config{Sources: host.NewDigestSources(w.Pool)}), Accounts: accounts, Endpoints: host.NewEndpoints(w.Pool, host.NewDirectory(w.Pool), todos, w.Clock),
		Todos: todos, Pool: w.Pool, Limiter: httpx.NewLimiter(1000, 1000),
		Webhooks: host.NewWebhooks(host.WebhooksConfig{Pool: w.Pool, Emitter: eng, SecretKey: w.Key, Clock: w.Clock}),
		Logger:   slog.New(slog.NewJSONHandler(w.Logs, nil)), Clock: w.Clock, BaseURL: "http://127.0.0.1",
	}
	deps.AuthFailures = httpx.NewAuthFailures(authFailuresPerMinute, authFailuresBurst, w.Clock)
	deps.Auth = &httpx.Auth{Accounts: accounts, Endpoints: deps.Endpoints, Clock: w.Clock, Failures: deps.AuthFailures}

	rec, err := demo.StartReceivers()
	require.NoError(t, err)
	t.Cleanup(rec.Close)
	h, err := accounts.CreateHuman(w.Ctx, "Demo", "demo@example.net")
	require.NoError(t, err)
	world, err := demo.Setup(w.Ctx, deps, rec, h.ID)
	require.NoError(t, err)
	// Setup replaces the demo sinks of an earlier run: a second run works.
	world, err = demo.Setup(w.Ctx, deps, rec, h.ID)
	require.NoError(t, err)
	token, err := accounts.MintAPIToken(w.Ctx, h.ID)
	require.NoError(t, err)

	handler := api.NewHandler(deps, api.Options{
		Metrics: metrics,
		Health:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		Demo:    demo.Handler(deps, world),
	})
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &server{w: w, eng: eng, url: srv.URL, token: token.Reveal(), humanID: h.ID, receivers: rec, world: world, todos: todos,
		deps: deps, handler: handler}
}

func (s *server) get(t *testing.T, path, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func requireStandardHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	require.NotEmpty(t, resp.Header.Get("Content-Security-Policy"), resp.Request.URL.Path)
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), resp.Request.URL.Path)
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), resp.Request.URL.Path)
	require.Equal(t, "strict-origin-when-cross-origin", resp.Header.Get("Referrer-Policy"), resp.Request.URL.Path)
}

// TestDemoDeadLetterReachesBothReceivers clicks make run's button: a todo
// dead-letters and the notification arrives at the local Gotify and
// Apprise receivers, and ops shows the actors and counts the deliveries.
func TestDemoDeadLetterReachesBothReceivers(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	// Log in with a one-time link, as the demo's printed link does.
	link, _, err := host.NewAccounts(s.w.Pool).MintLoginLink(s.w.Ctx, s.humanID)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	login, err := http.NewRequest(http.MethodPost, s.url+"/login/"+link.Reveal(), nil)
	require.NoError(t, err)
	login.Header.Set("Origin", s.url)
	resp, err := browser.Do(login)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, err := http.NewRequest(http.MethodPost, s.url+"/demo/dead-letter", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", s.url)
	resp, err = browser.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "redirected back to /demo")
	requireStandardHeaders(t, resp)

	for range 2 {
		a := s.w.WaitFor(func(a engine.Attempt) bool { return a.State == "delivered" })
		require.Equal(t, engine.Attempt{}.Class, a.Class)
	}
	inbox := s.receivers.Inbox()
	require.Len(t, inbox, 2)
	receivers := []string{inbox[0].Receiver, inbox[1].Receiver}
	require.ElementsMatch(t, []string{"gotify", "apprise"}, receivers)
	for _, m := range inbox {
		require.Equal(t, "Dead letter in forge: Nightly build failed on main", m.Title)
		require.NotContains(t, m.Body, "issue body", "no excerpt without the opt-in")
	}

	// A cross-origin post is refused and makes no dead letter.
	req, err = http.NewRequest(http.MethodPost, s.url+"/demo/dead-letter", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://evil.example")
	resp, err = browser.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Ops: the actor table and the metrics, behind an operator token.
	resp, _ = s.get(t, "/ops/actors", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	requireStandardHeaders(t, resp)
	resp, body := s.get(t, "/ops/actors", s.token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var actors struct{ Actors []engine.SinkStatus }
	require.NoError(t, json.Unmarshal([]byte(body), &actors))
	require.Len(t, actors.Actors, 2, "one actor per demo sink")
	for _, a := range actors.Actors {
		require.Equal(t, int64(1), a.Delivered)
	}

	resp, _ = s.get(t, "/metrics", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = s.get(t, "/metrics", s.token)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "metrics are for operators (D26)")
	_, err = host.NewAccounts(s.w.Pool).GrantOperator(s.w.Ctx, "demo@example.net")
	require.NoError(t, err)
	resp, body = s.get(t, "/metrics", s.token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `switchboard_delivery_attempts_total{class="",state="delivered"} 2`)
	require.Contains(t, body, "switchboard_claim_latency_seconds_count 2")
	require.Contains(t, body, `switchboard_outbox_rows{state="delivered"} 2`)
	require.Contains(t, body, "switchboard_sink_actors 2")
}

// TestEveryRouteCarriesTheStandardHeaders: whichever surface answers, and
// however it answers.
func TestEveryRouteCarriesTheStandardHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, path := range []string{"/healthz", "/api/v1/sinks", "/mcp", "/ops/actors", "/metrics", "/demo", "/sinks", "/login", "/nowhere"} {
		for _, token := range []string{"", s.token} {
			resp, _ := s.get(t, path, token)
			requireStandardHeaders(t, resp)
			require.False(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && resp.Header.Get("X-Frame-Options") == "", path)
		}
	}
}

// signIn returns a browser-like client signed in as the demo human.
func (s *server) signIn(t *testing.T) *http.Client {
	t.Helper()
	link, _, err := host.NewAccounts(s.w.Pool).MintLoginLink(s.w.Ctx, s.humanID)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	login, err := http.NewRequest(http.MethodPost, s.url+"/login/"+link.Reveal(), nil)
	require.NoError(t, err)
	login.Header.Set("Origin", s.url)
	resp, err := browser.Do(login)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return browser
}

// TestDemoDeadLettersTheTodoItMade: with another todo pending on the demo
// queue, the button still dead-letters the todo it just made (by id), and
// the older one stays pending; the page has the navigation bar, and a
// cross-origin post gets the styled refusal page.
func TestDemoDeadLettersTheTodoItMade(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	older, err := s.todos.Enqueue(s.w.Ctx, s.world.QueueID, host.TodoInput{Title: "waiting its turn"})
	require.NoError(t, err)
	browser := s.signIn(t)

	req, err := http.NewRequest(http.MethodPost, s.url+"/demo/dead-letter", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", s.url)
	resp, err := browser.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	made := resp.Request.URL.Query().Get("made")
	require.NotEmpty(t, made, resp.Request.URL.String())
	require.NotEqual(t, strconv.FormatInt(older.ID, 10), made)
	require.Equal(t, 1, s.w.F.Count(`SELECT count(*) FROM todos WHERE id = $1 AND state = 'pending'`, older.ID), "the older todo is untouched")
	require.Equal(t, 1, s.w.F.Count(`SELECT count(*) FROM todos WHERE id = $1 AND state = 'dead' AND dead_reason = 'fail at the cap'`, made))
	require.Contains(t, string(page), `<nav aria-label="Main"`)
	require.Contains(t, string(page), `<a href="/demo" aria-current="page">Demo</a>`)
	require.Contains(t, string(page), `href="/board/todos/`+made+`"`)

	req, err = http.NewRequest(http.MethodPost, s.url+"/demo/dead-letter", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://evil.example")
	resp, err = browser.Do(req)
	require.NoError(t, err)
	refusal, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, string(refusal), `<link rel="stylesheet" href="/static/style.css">`)
	require.Contains(t, string(refusal), "posted from another site")
	require.Equal(t, 1, s.w.F.Count(`SELECT count(*) FROM todos WHERE state = 'dead'`), "the refused post made nothing")
}
