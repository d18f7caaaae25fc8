package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/web"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// bundle is one web UI over a real engine on its own database.
type bundle struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	f        *hosttest.Factory
	eng      *engine.Engine
	accounts *host.Accounts
	deps     httpx.Deps
	srv      *httptest.Server
	logs     *syncBuffer
}

// syncBuffer collects log lines from concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setup builds the bundle and serves New(deps) on an httptest server whose
// URL is the base URL. configure edits the engine's config before New.
func setup(t *testing.T, configure ...func(*engine.Config)) *bundle {
	t.Helper()
	b := newBundle(t, configure...)
	b.serve(t)
	return b
}

// serve starts the web UI over b.deps, its URL the base URL.
func (b *bundle) serve(t *testing.T) {
	b.srv = httptest.NewUnstartedServer(nil)
	b.deps.BaseURL = "http://" + b.srv.Listener.Addr().String()
	b.srv.Config.Handler = web.New(b.deps)
	b.srv.Start()
	t.Cleanup(b.srv.Close)
}

// newBundle builds everything but the server.
func newBundle(t *testing.T, configure ...func(*engine.Config)) *bundle {
	t.Helper()
	pool := hosttest.New(t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	cfg := engine.Config{
		Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(), SecretKey: key,
		PushAllowHTTP: true, PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger: log,
	}
	for _, c := range configure {
		c(&cfg)
	}
	eng, err := engine.New(cfg)
	require.NoError(t, err)
	var dcfg digests.Config
	if _, ok := digestSourcesFor.LoadAndDelete(pool); ok {
		dcfg.Sources = host.NewDigestSources(pool)
	}
	accounts := host.NewAccounts(pool)
	dir := host.NewDirectory(pool)
	todos := host.NewTodos(pool, eng, nil)
	endpoints := host.NewEndpoints(pool, dir, todos, nil)
	return &bundle{
		ctx: context.Background(), pool: pool, f: hosttest.NewFactory(t, pool), eng: eng, accounts: accounts, logs: logs,
		deps: httpx.Deps{
			Engine: eng, Digests: digests.New(eng, dcfg), Accounts: accounts, Endpoints: endpoints, Todos: todos, Pool: pool,
			Auth:    &httpx.Auth{Accounts: accounts, Endpoints: endpoints, Clock: clocks.System{}},
			Limiter: httpx.NewLimiter(1000, 1000), Logger: log, Clock: clocks.System{},
		},
	}
}

// loginLink mints a one-time login link for the human.
func (b *bundle) loginLink(t *testing.T, humanID int64) string {
	t.Helper()
	tok, _, err := b.accounts.MintLoginLink(b.ctx, humanID)
	require.NoError(t, err)
	return tok.Reveal()
}

// client is a browser-like client: a cookie jar, and redirects not
// followed, so tests see them.
type client struct {
	t    *testing.T
	b    *bundle
	http *http.Client
}

// anon is a client with no session.
func (b *bundle) anon(t *testing.T) *client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &client{t: t, b: b, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// login signs the human in through a fresh login link.
func (b *bundle) login(t *testing.T, humanID int64) *client {
	t.Helper()
	c := b.anon(t)
	res := c.post("/login/"+b.loginLink(t, humanID), nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/sinks", res.header.Get("Location"))
	return c
}

// human creates a human and signs them in.
func (b *bundle) human(t *testing.T) (int64, *client) {
	t.Helper()
	id := b.f.Human("")
	return id, b.login(t, id)
}

// response is a read response.
type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(req *http.Request) response {
	c.t.Helper()
	res, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	return response{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (c *client) get(path string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.b.srv.URL+path, nil)
	require.NoError(c.t, err)
	return c.do(req)
}

// post posts a form; header adds request headers (Origin, Sec-Fetch-Site,
// Referer). With none of those three it sends Sec-Fetch-Site: same-origin,
// as the browser posting our own form does.
func (c *client) post(path string, form url.Values, header ...string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if req.Header.Get("Origin") == "" && req.Header.Get("Sec-Fetch-Site") == "" && req.Header.Get("Referer") == "" {
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	return c.do(req)
}

var refusalRE = regexp.MustCompile(`(?s)<div class="error" role="alert" id="refusal" data-code="([^"]*)" data-field="([^"]*)" data-scheme="([^"]*)">`)

// refusal returns the code, field and scheme of the refusal a page shows.
func (r response) refusal(t *testing.T) (code, field, scheme string) {
	t.Helper()
	m := refusalRE.FindStringSubmatch(r.body)
	require.NotNil(t, m, "the page shows no refusal:\n%s", r.body)
	return m[1], m[2], m[3]
}

// gotifyConnection creates a Gotify connection through the service.
func (b *bundle) gotifyConnection(t *testing.T, humanID int64, owner notifytype.OwnerScope, base, token string) engine.Connection {
	t.Helper()
	c, err := b.eng.CreateConnection(b.ctx, engine.HumanPrincipal(hostid.String(humanID)), engine.ConnectionInput{
		Owner: owner, Kind: engine.KindGotify, Name: "gotify-" + rand.Text()[:6], BaseURL: base,
		Secret: notifytype.NewSecret(token),
	})
	require.NoError(t, err)
	return c
}

// gotifySink creates a Gotify sink through the service.
func (b *bundle) gotifySink(t *testing.T, humanID int64, owner notifytype.OwnerScope, connID int64, name string) engine.Sink {
	t.Helper()
	s, err := b.eng.CreateSink(b.ctx, engine.HumanPrincipal(hostid.String(humanID)), engine.SinkInput{
		Owner: owner, Name: name, Kind: engine.KindGotify, ConnectionID: connID,
	})
	require.NoError(t, err)
	return s
}

func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	return b.f.Count(`SELECT count(*) FROM ` + storetest.Table(table))
}

// httptestRequest and serve run a handler without a server.
func httptestRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	if method != http.MethodGet && method != http.MethodHead {
		r.Header.Set("Sec-Fetch-Site", "same-origin") // as a browser posting our form
	}
	return r
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// storetestSink is a Gotify sink of the human, with its own connection.
func storetestSink(humanID int64) storetest.SinkOpts {
	return storetest.SinkOpts{Owner: hostid.Human(humanID)}
}

// storetestSub subscribes a sink to digests.
func storetestSub(sinkID int64) storetest.SubscriptionOpts {
	return storetest.SubscriptionOpts{Sink: sinkID, EventTypes: []notifytype.EventType{engine.EventDigest}}
}

func sinkEnabled(t *testing.T, b *bundle, sinkID int64) bool {
	t.Helper()
	return b.f.Count(`SELECT count(*) FROM switchboard.sinks WHERE id = $1 AND enabled`, sinkID) == 1
}

// between returns the text of s after the first from and before the next
// to.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, from)
	require.True(t, ok, "%q not found in:\n%s", from, s)
	before, _, ok := strings.Cut(after, to)
	require.True(t, ok, "%q not found after %q", to, from)
	return before
}

// newUnstartedServer is a test server whose address is known before its
// handler.
func newUnstartedServer() *httptest.Server { return httptest.NewUnstartedServer(nil) }

// webHandler is the web UI over b.deps.
func webHandler(b *bundle) http.Handler { return web.New(b.deps) }

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// once follows the redirect res must be (post-redirect-get) to its one-time
// page, checks that a second load of that page (a reload) shows it no more
// and goes to notice's page instead, and returns the first load.
func (c *client) once(res response, noticeKey string) response {
	c.t.Helper()
	require.Equal(c.t, http.StatusSeeOther, res.status, "an action answers with a redirect:\n%s", res.body)
	loc := res.header.Get("Location")
	first := c.get(loc)
	require.Equal(c.t, http.StatusOK, first.status, first.body)
	again := c.get(loc)
	require.Equal(c.t, http.StatusSeeOther, again.status, "a reload of %s shows it no more", loc)
	require.Contains(c.t, again.header.Get("Location"), "notice="+noticeKey)
	return first
}
