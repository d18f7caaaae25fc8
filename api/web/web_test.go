package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/web"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/sinktest"
)

func TestLoginLinkWorksOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.f.Human("")
	link := b.loginLink(t, id)

	c := b.anon(t)
	// Opening the link only asks to sign in: a link previewer fetching it
	// spends nothing.
	ask := c.get("/login/" + link)
	require.Equal(t, http.StatusOK, ask.status)
	require.Empty(t, ask.header.Get("Set-Cookie"))
	require.Contains(t, ask.body, `action="/login/`+link+`"`)
	// A "next" parameter is never followed: the landing page is fixed.
	res := c.post("/login/"+link+"?next=https://evil.example/", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/sinks", res.header.Get("Location"))
	cookie := res.header.Get("Set-Cookie")
	require.True(t, strings.HasPrefix(cookie, httpx.SessionCookie+"=sbs_"), cookie)
	require.Contains(t, cookie, "Path=/")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Lax")
	require.NotContains(t, cookie, "Secure", "the base URL is http")

	page := c.get("/sinks")
	require.Equal(t, http.StatusOK, page.status, page.body)
	hum, err := hoststore.HumanByID(b.ctx, b.pool, id)
	require.NoError(t, err)
	require.Contains(t, page.body, "<h2>Sinks of "+hum.Name+" ("+hum.Email+")</h2>", "the human's name, not an id")

	// The link is spent: a second use, in any browser, fails without a
	// session or a redirect.
	again := b.anon(t).post("/login/"+link, nil)
	require.Equal(t, http.StatusNotFound, again.status)
	require.Empty(t, again.header.Get("Set-Cookie"))
	require.Empty(t, again.header.Get("Location"))
	require.Contains(t, again.body, "unknown, expired or already used")
	code, _, _ := again.refusal(t)
	require.Equal(t, "not_found", code)

	for _, bad := range []string{"sbl_nonsense", "garbage", "sbs_" + link[4:]} {
		res := b.anon(t).post("/login/"+bad, nil)
		require.Equal(t, http.StatusNotFound, res.status, bad)
		require.Empty(t, res.header.Get("Set-Cookie"), bad)
	}

	// Signing out ends the session on the server, not just in the browser.
	out := c.post("/logout", nil)
	require.Equal(t, http.StatusSeeOther, out.status)
	require.Equal(t, "/login", out.header.Get("Location"))
	require.Zero(t, b.f.Count(`SELECT count(*) FROM sessions`))
	require.Equal(t, "/login", c.get("/sinks").header.Get("Location"))
}

func TestSessionCookieSecureBehindHTTPS(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.deps.BaseURL = "https://switchboard.example.net"
	h := web.New(b.deps)
	id := b.f.Human("")
	req := httptestRequest(http.MethodPost, "/login/"+b.loginLink(t, id), nil)
	rec := serve(h, req)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	cookie := rec.Header().Get("Set-Cookie")
	require.Contains(t, cookie, "Secure")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Lax")
}

func TestPagesNeedSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := b.f.Human("")
	sink := b.f.Sink(storetestSink(owner))

	anon := b.anon(t)
	bogus := b.anon(t)
	u, err := url.Parse(b.srv.URL)
	require.NoError(t, err)
	bogus.http.Jar.SetCookies(u, []*http.Cookie{{Name: httpx.SessionCookie, Value: "sbs_forged"}})

	gets := []string{"/", "/sinks", "/sinks?owner=human:" + strconv.FormatInt(owner, 10),
		"/sinks/" + strconv.FormatInt(sink, 10), "/connections", "/endpoints", "/ops"}
	for _, c := range []*client{anon, bogus} {
		for _, path := range gets {
			res := c.get(path)
			require.Equal(t, http.StatusSeeOther, res.status, path)
			if path == "/" {
				continue // / always goes to /sinks, which needs the session
			}
			want := "/login?next=" + url.QueryEscape(path)
			if path == "/sinks" {
				want = "/login" // the page a sign-in lands on anyway
			}
			require.Equal(t, want, res.header.Get("Location"), path)
		}
		posts := []string{"/sinks", "/sinks/" + strconv.FormatInt(sink, 10) + "/delete",
			"/sinks/" + strconv.FormatInt(sink, 10) + "/disable", "/connections", "/endpoints/quick", "/endpoints/vend"}
		for _, path := range posts {
			res := c.post(path, url.Values{"name": {"x"}, "kind": {"gotify"}})
			require.Equal(t, http.StatusSeeOther, res.status, path)
			require.Equal(t, "/login", res.header.Get("Location"), path)
		}
	}
	require.Equal(t, 1, b.count(t, "sinks"))
	require.Equal(t, 1, b.count(t, "connections"))
	require.Zero(t, b.count(t, "endpoints"))
	require.True(t, sinkEnabled(t, b, sink))

	login := anon.get("/login")
	require.Equal(t, http.StatusOK, login.status)
	require.Contains(t, login.body, "switchboard-notify demo")
	require.Contains(t, login.body, "one-time sign-in link")
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.token")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")
	del := "/sinks/" + strconv.FormatInt(sink.ID, 10) + "/delete"

	foreign := [][]string{
		{"Origin", "https://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"},
		{"Origin", "http://127.0.0.1:1"}, // another port is another origin
	}
	for _, h := range foreign {
		res := c.post(del, nil, h...)
		require.Equal(t, http.StatusForbidden, res.status, "%v", h)
		require.Contains(t, res.body, "posted from another site", "%v", h)
		require.Empty(t, res.header.Get("Location"))
		require.Equal(t, "DENY", res.header.Get("X-Frame-Options"))

		res = c.post("/sinks", url.Values{"name": {"evil"}, "kind": {"gotify"}, "connection_id": {strconv.FormatInt(conn.ID, 10)}}, h...)
		require.Equal(t, http.StatusForbidden, res.status, "%v", h)
		res = c.post("/logout", nil, h...)
		require.Equal(t, http.StatusForbidden, res.status, "%v", h)
	}
	require.Equal(t, 1, b.count(t, "sinks"), "nothing changed")
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM sessions`), "still signed in")
	_, err := b.eng.GetSink(b.ctx, engine.HumanPrincipal(hostid.String(id)), sink.ID)
	require.NoError(t, err)

	// The same post from our own pages goes through.
	res := c.post(del, nil, "Sec-Fetch-Site", "same-origin", "Origin", b.srv.URL)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/sinks?notice=sink_deleted&owner=human%3A"+strconv.FormatInt(id, 10), res.header.Get("Location"))
	require.Zero(t, b.count(t, "sinks"))
}

// TestBadInputsGiveTheAPICodes posts the inputs the API refuses and checks
// each page shows the refusal the service gives the API for the same input
// (code, field, scheme, and the status httpx maps it to), that nothing is
// stored, and that the form keeps what was typed, less secrets.
func TestBadInputsGiveTheAPICodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	p := engine.HumanPrincipal(hostid.String(id))
	other := b.f.Human("")
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.token")
	foreignConn := b.gotifyConnection(t, other, hostid.Human(other), "https://gotify.example.net", "gtfya.other")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")
	foreignQueue := b.f.Queue(hostid.Human(other), "")
	owner := me.String()
	connID := strconv.FormatInt(conn.ID, 10)
	subs := "/sinks/" + strconv.FormatInt(sink.ID, 10) + "/subscriptions"

	cases := []struct {
		name   string
		path   string
		form   url.Values
		api    func() error // the same input through the service, as the API sends it
		code   string
		field  string
		keeps  string // a typed value the form must show again
		table  string
		before int
	}{
		{
			name: "connection json scheme", path: "/connections",
			form: url.Values{"owner": {owner}, "kind": {"apprise"}, "name": {"relay"}, "account_key": {"https://apprise.example.net"},
				"apprise_urls": {"json://hooks.example.net/x"}},
			api: func() error {
				_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{Owner: me, Kind: "apprise", Name: "relay",
					BaseURL: "https://apprise.example.net", Secret: notifytype.NewSecret(`{"urls":["json://hooks.example.net/x"]}`)})
				return err
			},
			code: "forbidden_scheme", keeps: `value="relay"`, table: "connections",
		},
		{
			// Apprise reads this one line as two services: the comma
			// smuggles json:// past the allowlist (REQ-4, D23).
			name: "connection comma-smuggled json scheme", path: "/connections",
			form: url.Values{"owner": {owner}, "kind": {"apprise"}, "name": {"mail"}, "account_key": {"https://apprise.example.net"},
				"apprise_urls": {"mailto://u:p@example.com,json://169.254.169.254/latest/meta-data/"}},
			api: func() error {
				_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{Owner: me, Kind: "apprise", Name: "mail",
					BaseURL: "https://apprise.example.net", Secret: notifytype.NewSecret(`{"urls":["mailto://u:p@example.com,json://169.254.169.254/latest/meta-data/"]}`)})
				return err
			},
			code: "forbidden_scheme", keeps: `value="mail"`, table: "connections",
		},
		{
			name: "connection without token", path: "/connections",
			form: url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"phone2"}, "account_key": {"https://gotify.example.net"}},
			api: func() error {
				_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{Owner: me, Kind: "gotify", Name: "phone2",
					BaseURL: "https://gotify.example.net"})
				return err
			},
			code: "invalid_argument", field: "secret", keeps: `value="https://gotify.example.net"`, table: "connections",
		},
		{
			name: "connection base URL not https", path: "/connections",
			form: url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"ftp"}, "account_key": {"ftp://gotify.example.net"}, "secret": {"gtfya.x"}},
			api: func() error {
				_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{Owner: me, Kind: "gotify", Name: "ftp",
					BaseURL: "ftp://gotify.example.net", Secret: notifytype.NewSecret("gtfya.x")})
				return err
			},
			code: "invalid_argument", field: "account_key", keeps: `value="ftp"`, table: "connections",
		},
		{
			name: "connection of unknown kind", path: "/connections",
			form: url.Values{"owner": {owner}, "kind": {"slack"}, "name": {"s"}, "account_key": {"https://x.example.net"}, "secret": {"t"}},
			api: func() error {
				_, err := b.eng.CreateConnection(b.ctx, p, engine.ConnectionInput{Owner: me, Kind: "slack", Name: "s",
					BaseURL: "https://x.example.net", Secret: notifytype.NewSecret("t")})
				return err
			},
			code: "invalid_argument", field: "kind", table: "connections",
		},
		{
			name: "sink without name", path: "/sinks",
			form: url.Values{"owner": {owner}, "kind": {"gotify"}, "connection_id": {connID}, "tag": {"kept-tag"}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Kind: "gotify", ConnectionID: conn.ID})
				return err
			},
			code: "invalid_argument", field: "name", table: "sinks",
		},
		{
			name: "sink of unknown kind", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"pager"}, "kind": {"pagerduty"}, "connection_id": {connID}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "pager", Kind: "pagerduty", ConnectionID: conn.ID})
				return err
			},
			code: "invalid_argument", field: "kind", keeps: `value="pager"`, table: "sinks",
		},
		{
			name: "sink without connection", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"pager"}, "kind": {"gotify"}, "connection_id": {""}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "pager", Kind: "gotify"})
				return err
			},
			code: "invalid_argument", field: "connection_id", keeps: `value="pager"`, table: "sinks",
		},
		{
			name: "sink on another owner's connection", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"pager"}, "kind": {"gotify"}, "connection_id": {strconv.FormatInt(foreignConn.ID, 10)}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "pager", Kind: "gotify", ConnectionID: foreignConn.ID})
				return err
			},
			code: "forbidden", field: "connection_id", keeps: `value="pager"`, table: "sinks",
		},
		{
			name: "sink on a connection of another kind", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"pager"}, "kind": {"apprise"}, "connection_id": {connID}, "config_key": {"ops"}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "pager", Kind: "apprise", ConnectionID: conn.ID,
					Options: json.RawMessage(`{"config_key":"ops"}`)})
				return err
			},
			code: "forbidden", field: "connection_id", keeps: `value="ops"`, table: "sinks",
		},
		{
			name: "sink name taken", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"phone"}, "kind": {"gotify"}, "connection_id": {connID}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "phone", Kind: "gotify", ConnectionID: conn.ID})
				return err
			},
			code: "invalid_argument", field: "name", keeps: `value="phone"`, table: "sinks",
		},
		{
			name: "priority out of range", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"loud"}, "kind": {"gotify"}, "connection_id": {connID}, "priority_high": {"11"}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "loud", Kind: "gotify", ConnectionID: conn.ID,
					Options: json.RawMessage(`{"priorities":{"high":11}}`)})
				return err
			},
			code: "invalid_argument", field: "options.priorities.high", keeps: `value="11"`, table: "sinks",
		},
		{
			name: "priority not a number", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"loud"}, "kind": {"gotify"}, "connection_id": {connID}, "priority_low": {"soft"}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "loud", Kind: "gotify", ConnectionID: conn.ID,
					Options: json.RawMessage(`{"priorities":{"low":"soft"}}`)})
				return err
			},
			code: "invalid_argument", field: "options.priorities.low", keeps: `value="soft"`, table: "sinks",
		},
		{
			name: "budget above the operator's bound", path: "/sinks",
			form: url.Values{"owner": {owner}, "name": {"busy"}, "kind": {"gotify"}, "connection_id": {connID}, "budget_per_hour": {"1000"}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: me, Name: "busy", Kind: "gotify", ConnectionID: conn.ID, BudgetPerHour: 1000})
				return err
			},
			code: "invalid_argument", field: "budget_per_hour", keeps: `value="1000"`, table: "sinks",
		},
		{
			name: "sink in another human's scope", path: "/sinks",
			form: url.Values{"owner": {hostid.Human(other).String()}, "name": {"sneaky"}, "kind": {"gotify"}, "connection_id": {strconv.FormatInt(foreignConn.ID, 10)}},
			api: func() error {
				_, err := b.eng.CreateSink(b.ctx, p, engine.SinkInput{Owner: hostid.Human(other), Name: "sneaky", Kind: "gotify", ConnectionID: foreignConn.ID})
				return err
			},
			code: "not_found", table: "sinks",
		},
		{
			name: "subscription without event types", path: subs,
			form: url.Values{"min_severity": {"high"}, "queues": {""}},
			api: func() error {
				_, err := b.eng.AddSubscription(b.ctx, p, sink.ID, engine.SubscriptionInput{MinSeverity: "high"})
				return err
			},
			code: "invalid_argument", field: "event_types", table: "subscriptions",
		},
		{
			name: "subscription of an unknown event type", path: subs,
			form: url.Values{"event_types": {"todo.assigned"}},
			api: func() error {
				_, err := b.eng.AddSubscription(b.ctx, p, sink.ID, engine.SubscriptionInput{EventTypes: []notifytype.EventType{"todo.assigned"}})
				return err
			},
			code: "invalid_argument", field: "event_types", table: "subscriptions",
		},
		{
			name: "subscription filtered to another owner's queue", path: subs,
			form: url.Values{"event_types": {"todo.dead_lettered"}, "queues": {strconv.FormatInt(foreignQueue, 10)}},
			api: func() error {
				_, err := b.eng.AddSubscription(b.ctx, p, sink.ID, engine.SubscriptionInput{
					EventTypes: []notifytype.EventType{"todo.dead_lettered"}, Queues: []int64{foreignQueue}})
				return err
			},
			code: "invalid_argument", field: "queues", keeps: `value="` + strconv.FormatInt(foreignQueue, 10) + `"`, table: "subscriptions",
		},
		{
			name: "subscription with a bad severity", path: subs,
			form: url.Values{"event_types": {"digest"}, "min_severity": {"urgent"}},
			api: func() error {
				_, err := b.eng.AddSubscription(b.ctx, p, sink.ID, engine.SubscriptionInput{
					EventTypes: []notifytype.EventType{"digest"}, MinSeverity: "urgent"})
				return err
			},
			code: "invalid_argument", field: "min_severity", table: "subscriptions",
		},
	}
	for _, tc := range cases {
		before := b.count(t, tc.table)
		apiErr := tc.api()
		require.Error(t, apiErr, tc.name)
		want := httpx.Public(apiErr)
		require.Equal(t, tc.code, string(want.Code), "%s: the service's refusal: %v", tc.name, apiErr)
		require.Equal(t, tc.field, want.Field, "%s: the service's refusal: %v", tc.name, apiErr)

		res := c.post(tc.path, tc.form)
		require.Equal(t, httpx.StatusOf(apiErr), res.status, "%s\n%s", tc.name, res.body)
		code, field, scheme := res.refusal(t)
		require.Equal(t, string(want.Code), code, tc.name)
		require.Equal(t, want.Field, field, tc.name)
		require.Equal(t, want.Scheme, scheme, tc.name)
		if tc.keeps != "" {
			require.Contains(t, res.body, tc.keeps, "%s: the form keeps what was typed", tc.name)
		}
		require.Equal(t, before, b.count(t, tc.table), "%s: nothing stored", tc.name)
		if want.Field == "connection_id" {
			// A connection of another kind or scope is refused under the
			// Connection picker, not only at the top (issue 19 item 7).
			require.Contains(t, between(t, res.body, `id="sink-connection"`, `</form>`), `id="error-connection_id"`, tc.name)
			require.Contains(t, res.body, `id="sink-connection" aria-invalid="true"`, tc.name)
		}
	}

	// A forbidden scheme is named, and the URL is never echoed.
	res := c.post("/connections", cases[0].form)
	_, _, scheme := res.refusal(t)
	require.Equal(t, "json", scheme)
	require.NotContains(t, res.body, "hooks.example.net")
}

func TestTeamMemberCannotWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.f.Human("")
	member, mc := b.human(t)
	_, outsider := b.human(t)
	team := b.f.Team("")
	b.f.Member(team, admin, "admin")
	b.f.Member(team, member, "member")
	scope := hostid.Team(team)
	conn := b.gotifyConnection(t, admin, scope, "https://gotify.example.net", "gtfya.team")
	sink := b.gotifySink(t, admin, scope, conn.ID, "team-phone")
	sid := strconv.FormatInt(sink.ID, 10)

	// A member reads, without forms.
	page := mc.get("/sinks?owner=" + url.QueryEscape(scope.String()))
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, "team-phone")
	require.Contains(t, page.body, "only its owners and admins change them")
	require.NotContains(t, page.body, `id="create-sink"`)
	page = mc.get("/sinks/" + sid)
	require.Equal(t, http.StatusOK, page.status)
	require.NotContains(t, page.body, `id="send-test"`)

	// A member's writes are refused with forbidden, and change nothing.
	writes := []struct {
		path string
		form url.Values
	}{
		{"/sinks", url.Values{"owner": {scope.String()}, "name": {"mine"}, "kind": {"gotify"}, "connection_id": {strconv.FormatInt(conn.ID, 10)}}},
		{"/sinks/" + sid, url.Values{"name": {"renamed"}, "connection_id": {strconv.FormatInt(conn.ID, 10)}}},
		{"/sinks/" + sid + "/disable", nil},
		{"/sinks/" + sid + "/delete", nil},
		{"/sinks/" + sid + "/test", nil},
		{"/sinks/" + sid + "/subscriptions", url.Values{"event_types": {"digest"}}},
		{"/connections", url.Values{"owner": {scope.String()}, "kind": {"gotify"}, "name": {"c"}, "account_key": {"https://g.example.net"}, "secret": {"gtfya.m"}}},
		{"/connections/" + strconv.FormatInt(conn.ID, 10) + "/delete", url.Values{"owner": {scope.String()}}},
		{"/endpoints/quick", url.Values{"owner": {scope.String()}}},
		{"/endpoints/vend", url.Values{"owner": {scope.String()}, "name": {"agent"}, "grant": {"todos"}}},
	}
	for _, w := range writes {
		res := mc.post(w.path, w.form)
		require.Equal(t, http.StatusForbidden, res.status, "%s\n%s", w.path, res.body)
		code, _, _ := res.refusal(t)
		require.Equal(t, "forbidden", code, w.path)
	}
	got, err := b.eng.GetSink(b.ctx, engine.HumanPrincipal(hostid.String(admin)), sink.ID)
	require.NoError(t, err)
	require.Equal(t, "team-phone", got.Name)
	require.True(t, got.Enabled)
	require.Equal(t, 1, b.count(t, "sinks"))
	require.Equal(t, 1, b.count(t, "connections"))
	require.Zero(t, b.count(t, "subscriptions"))
	require.Zero(t, b.count(t, "endpoints"))
	require.Zero(t, b.count(t, "delivery_records"))

	// Someone with no part in the team sees nothing of it.
	for _, path := range []string{"/sinks?owner=" + url.QueryEscape(scope.String()), "/sinks/" + sid,
		"/connections?owner=" + url.QueryEscape(scope.String()), "/endpoints?owner=" + url.QueryEscape(scope.String())} {
		res := outsider.get(path)
		require.Equal(t, http.StatusNotFound, res.status, path)
		require.NotContains(t, res.body, "team-phone", path)
	}
	res := outsider.post("/sinks/"+sid+"/delete", nil)
	require.Equal(t, http.StatusNotFound, res.status)
	require.Equal(t, 1, b.count(t, "sinks"))
}

func TestHeadersOnEveryPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.token")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")

	var all []response
	for _, path := range []string{"/sinks", "/sinks/" + strconv.FormatInt(sink.ID, 10), "/sinks/999999", "/connections",
		"/endpoints", "/ops", "/login", "/static/style.css", "/sinks?owner=bogus"} {
		all = append(all, c.get(path))
	}
	all = append(all,
		b.anon(t).get("/sinks"),
		b.anon(t).get("/login"),
		b.anon(t).post("/login/sbl_spent", nil),
		c.post("/sinks", url.Values{"name": {""}}),
		c.post("/sinks/"+strconv.FormatInt(sink.ID, 10)+"/delete", nil, "Sec-Fetch-Site", "cross-site"),
		c.post("/endpoints/vend", url.Values{"name": {"a"}, "grant": {"notifications"}}),
		c.post("/endpoints/quick", nil),
	)
	for i, res := range all {
		h := res.header
		require.Equal(t, httpx.ContentSecurityPolicy, h.Get("Content-Security-Policy"), i)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"), i)
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), i)
		require.Equal(t, "strict-origin-when-cross-origin", h.Get("Referrer-Policy"), i)
		require.Equal(t, "no-store", h.Get("Cache-Control"), i)
	}
	// The pages run under the policy as they are: no inline script or
	// style (a script is a file of our own, /static/…).
	ours := regexp.MustCompile(`<script src="/static/[a-z]+\.js"></script>`)
	for _, res := range all {
		require.Equal(t, strings.Count(res.body, "<script"), len(ours.FindAllString(res.body, -1)))
		require.NotContains(t, res.body, "style=")
	}
}

func TestBodyIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, c := b.human(t)
	res := c.post("/sinks", url.Values{"name": {strings.Repeat("x", httpx.MaxBody+1)}, "kind": {"gotify"}})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.status, res.body)
	require.Zero(t, b.count(t, "sinks"))
}

// TestSecretsNeverRendered plants canaries as a Gotify token, an Apprise URL
// and an authorization value, through the forms and on refused forms, and
// checks no page and no log line ever carries them.
func TestPagesShareThePerHumanLimiter(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	b.deps.Limiter = httpx.NewLimiter(1e-6, 3) // three requests, then none for days
	b.serve(t)
	id, c := b.human(t)
	_, other := b.human(t)
	for range 3 {
		require.Equal(t, http.StatusOK, c.get("/sinks").status)
	}
	res := c.post("/endpoints/quick", url.Values{"owner": {hostid.Human(id).String()}})
	require.Equal(t, http.StatusTooManyRequests, res.status)
	code, _, _ := res.refusal(t)
	require.Equal(t, "rate_limited", code)
	require.Zero(t, b.count(t, "endpoints"))
	require.Equal(t, http.StatusOK, other.get("/sinks").status, "each human has a share of their own")
}

func TestSecretsNeverRendered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	const (
		token = "gtfya.CANARYtokenQ8x7Zp2LmN4"
		turl  = "tgram://CANARYbotTokenW3r9/CANARYchat77"
		auth  = "Bearer CANARYauthValueK5t1"
		creds = "CANARYpasswordInURL9q"
	)
	canaries := []string{token, "CANARYtokenQ8x7Zp2LmN4", turl, "CANARYbotTokenW3r9", auth, "CANARYauthValueK5t1", creds}
	owner := hostid.Human(id).String()

	var pages []response
	// Saved, on loopback where nothing listens, so the tests below fail
	// at once.
	pages = append(pages, c.post("/connections", url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"phone"},
		"account_key": {sinktest.RefusedURL(t)}, "secret": {token}}))
	pages = append(pages, c.post("/connections", url.Values{"owner": {owner}, "kind": {"apprise"}, "name": {"relay"},
		"account_key": {sinktest.RefusedURL(t)}, "apprise_urls": {turl}, "apprise_authorization": {auth}}))
	require.Equal(t, 2, b.count(t, "connections"))
	// Refused, each for a field other than the secret, and for the secret.
	pages = append(pages,
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {""}, "account_key": {"https://gotify.example.net"}, "secret": {token}}),
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"phone"}, "account_key": {"https://gotify.example.net"}, "secret": {token}}),
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"p2"}, "account_key": {"https://gotify.example.net"}, "secret": {token + " with space"}}),
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"apprise"}, "name": {"r2"}, "account_key": {"https://apprise.example.net"},
			"apprise_urls": {turl + "\njson://" + turl[8:]}, "apprise_authorization": {auth}}),
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"apprise"}, "name": {"r3"}, "account_key": {"https://apprise.example.net"},
			"apprise_urls": {"not a url " + turl}}),
		c.post("/connections", url.Values{"owner": {owner}, "kind": {"gotify"}, "name": {"p3"}, "account_key": {"https://user:" + creds + "@gotify.example.net"}, "secret": {token}}),
	)
	for _, res := range pages[2:] {
		require.NotEqual(t, http.StatusSeeOther, res.status, res.body)
		require.Contains(t, res.body, `type="password" name="secret"`)
	}
	require.Equal(t, 2, b.count(t, "connections"))
	conns, err := b.eng.ListConnections(b.ctx, engine.HumanPrincipal(hostid.String(id)), hostid.Human(id))
	require.NoError(t, err)
	// A sink on each connection, a test through each (both fail: nothing
	// listens there), and every page.
	for _, conn := range conns {
		form := url.Values{"owner": {owner}, "name": {"sink-" + conn.Name}, "kind": {conn.Kind}, "connection_id": {strconv.FormatInt(conn.ID, 10)}}
		if conn.Kind == engine.KindApprise {
			// The Apprise connection carries URLs: a config_key too is refused.
			refused := c.post("/sinks", url.Values{"owner": {owner}, "name": {"both"}, "kind": {conn.Kind},
				"connection_id": {strconv.FormatInt(conn.ID, 10)}, "config_key": {"ops"}})
			require.Equal(t, http.StatusBadRequest, refused.status, refused.body)
			pages = append(pages, refused)
		}
		res := c.post("/sinks", form)
		require.Equal(t, http.StatusSeeOther, res.status, res.body)
		path := res.header.Get("Location")
		pages = append(pages, c.post(path+"/test", nil), c.get(path))
	}
	for _, path := range []string{"/sinks", "/connections", "/endpoints", "/ops"} {
		pages = append(pages, c.get(path))
	}
	for i, res := range pages {
		for _, canary := range canaries {
			require.NotContains(t, res.body, canary, "page %d", i)
			for _, v := range res.header {
				require.NotContains(t, strings.Join(v, " "), canary, "page %d", i)
			}
		}
	}
	logs := b.logs.String()
	for _, canary := range canaries {
		require.NotContains(t, logs, canary)
	}
}

func TestSinkPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	gotify := sinktest.NewServer(t, nil)
	conn := b.gotifyConnection(t, id, me, gotify.URL, "gtfya.pages")
	down := b.gotifyConnection(t, id, me, sinktest.RefusedURL(t), "gtfya.down")
	queue := b.f.Queue(me, "forge")

	// Create.
	res := c.post("/sinks", url.Values{"owner": {me.String()}, "name": {"phone"}, "kind": {"gotify"}, "enabled": {"1"},
		"connection_id": {strconv.FormatInt(conn.ID, 10)}, "priority_high": {"9"}, "budget_per_hour": {"60"}, "budget_burst": {"5"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	sinks, err := b.eng.ListSinks(b.ctx, engine.HumanPrincipal(hostid.String(id)), me)
	require.NoError(t, err)
	require.Len(t, sinks, 1)
	sk := sinks[0]
	path := "/sinks/" + strconv.FormatInt(sk.ID, 10)
	require.Equal(t, path+"?notice=sink_created", res.header.Get("Location"))
	require.Contains(t, c.get(res.header.Get("Location")).body, `id="notice">Sink created.`)
	require.Equal(t, 60, sk.BudgetPerHour)
	require.JSONEq(t, `{"priorities":{"low":2,"normal":5,"high":9}}`, string(sk.Options))

	list := c.get("/sinks")
	require.Contains(t, list.body, `<a href="`+path+`">phone</a>`)

	// Edit: rename, move to the other connection, change priorities.
	res = c.post(path, url.Values{"name": {"pager"}, "connection_id": {strconv.FormatInt(down.ID, 10)}, "priority_low": {"1"},
		"priority_normal": {"5"}, "priority_high": {"10"}, "budget_per_hour": {"60"}, "budget_burst": {"5"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, path+"?notice=sink_saved", res.header.Get("Location"))
	sk, err = b.eng.GetSink(b.ctx, engine.HumanPrincipal(hostid.String(id)), sk.ID)
	require.NoError(t, err)
	require.Equal(t, "pager", sk.Name)
	require.Equal(t, down.ID, sk.ConnectionID)
	require.JSONEq(t, `{"priorities":{"low":1,"normal":5,"high":10}}`, string(sk.Options))

	// Send test through a server that is down: the result is a redirect
	// (a reload sends nothing again), and the page says the class in words.
	res = c.post(path+"/test", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, path+"?class=network&test=failed", res.header.Get("Location"))
	res = c.get(res.header.Get("Location"))
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, res.body, `Test message not delivered: error class <strong>network</strong>.`)
	require.Contains(t, res.body, "The server could not be reached")
	// Back on the live server: delivered.
	res = c.post(path, url.Values{"name": {"pager"}, "connection_id": {strconv.FormatInt(conn.ID, 10)}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	res = c.post(path+"/test", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Len(t, gotify.Requests(), 1)
	// Reloading the result page shows it again and sends nothing.
	result := res.header.Get("Location")
	require.Equal(t, path+"?test=delivered", result)
	for range 2 {
		res = c.get(result)
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Contains(t, res.body, "Test message delivered.")
	}
	require.Len(t, gotify.Requests(), 1, "a reload sends nothing")
	require.Contains(t, res.body, `<td data-label="Event">test message</td>`)
	require.Contains(t, res.body, "<strong>network</strong>", "the failed test's record shows its class")

	// Disable and enable.
	res = c.post(path+"/disable", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.False(t, sinkEnabled(t, b, sk.ID))
	require.Contains(t, c.get(path).body, `id="enable"`)
	res = c.post(path+"/enable", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.True(t, sinkEnabled(t, b, sk.ID))

	// Subscriptions: add one with every field, then delete it.
	res = c.post(path+"/subscriptions", url.Values{"event_types": {"todo.dead_lettered", "relay.exhausted"},
		"queues": {strconv.FormatInt(queue, 10)}, "min_severity": {"normal"}, "include_excerpt": {"1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	subs, err := b.eng.ListSubscriptions(b.ctx, engine.HumanPrincipal(hostid.String(id)), sk.ID)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.Equal(t, []notifytype.EventType{"todo.dead_lettered", "relay.exhausted"}, subs[0].EventTypes)
	require.Equal(t, []int64{queue}, subs[0].Queues)
	require.Equal(t, notifytype.SeverityNormal, subs[0].MinSeverity)
	require.True(t, subs[0].IncludeExcerpt)
	page := c.get(path)
	require.Contains(t, between(t, page.body, `id="subscriptions"`, `</table>`), "A todo dead-lettered; A relay ran out of attempts", "event types in words")
	res = c.post(path+"/subscriptions/"+strconv.FormatInt(subs[0].ID, 10)+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Zero(t, b.count(t, "subscriptions"))

	// Delete: back to the list of the sink's scope; records stay.
	res = c.post(path+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/sinks?notice=sink_deleted&owner=human%3A"+strconv.FormatInt(id, 10), res.header.Get("Location"))
	require.Zero(t, b.count(t, "sinks"))
	require.Equal(t, 2, b.count(t, "delivery_records"))
	require.Equal(t, http.StatusNotFound, c.get(path).status)
}

func TestHumanCannotSeeAnotherHumansSink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.f.Human("")
	conn := b.gotifyConnection(t, a, hostid.Human(a), "https://gotify.example.net", "gtfya.a")
	sink := b.gotifySink(t, a, hostid.Human(a), conn.ID, "a-phone")
	_, c := b.human(t)
	path := "/sinks/" + strconv.FormatInt(sink.ID, 10)
	for _, res := range []response{c.get(path), c.post(path+"/test", nil), c.post(path+"/delete", nil), c.post(path+"/disable", nil),
		c.get("/sinks?owner=human:" + strconv.FormatInt(a, 10))} {
		require.Equal(t, http.StatusNotFound, res.status)
		require.NotContains(t, res.body, "a-phone")
	}
	require.True(t, sinkEnabled(t, b, sink.ID))
	require.Zero(t, b.count(t, "delivery_records"))
}

func TestEndpointVending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	owner := hostid.Human(id).String()

	// The wizard and quick vend list notifications and notify_owner
	// unchecked, the basics checked.
	page := c.get("/endpoints")
	require.Equal(t, http.StatusOK, page.status)
	for _, g := range []string{"todos", "rules"} {
		require.Contains(t, page.body, `<input type="checkbox" name="grant" value="`+g+`" checked>`)
	}
	for _, g := range []string{"notifications", "notify_owner"} {
		require.Contains(t, page.body, `<input type="checkbox" name="grant" value="`+g+`"> <code>`+g+`</code>`)
	}
	quick := between(t, page.body, `id="quick-vend"`, "</form>")
	require.Equal(t, 2, strings.Count(quick, "disabled checked"), "quick vend shows the basics checked")
	require.Equal(t, 4, strings.Count(quick, `type="checkbox" disabled`))

	// Quick vend: the basics, and the credential once.
	res := c.once(c.post("/endpoints/quick", url.Values{"owner": {owner}}), "credential_shown")
	require.Equal(t, 1, b.count(t, "endpoints"), "loading the credential's page twice vends one endpoint")
	cred := between(t, res.body, `<code id="credential">`, "</code>")
	require.True(t, strings.HasPrefix(cred, "sbe_"), cred)
	_, ep, err := b.deps.Endpoints.Authenticate(b.ctx, cred)
	require.NoError(t, err)
	require.Equal(t, []notifytype.Grant{"todos", "rules"}, ep.Grants)
	list := c.get("/endpoints")
	require.NotContains(t, list.body, cred, "the credential is shown once")
	require.Contains(t, list.body, ep.Name)

	// Asking for notifications or notify_owner shows the consent screen
	// first and vends nothing.
	for _, g := range []string{"notifications", "notify_owner"} {
		res = c.post("/endpoints/vend", url.Values{"owner": {owner}, "name": {"risky-" + g}, "grant": {"todos", g}})
		require.Equal(t, http.StatusOK, res.status, res.body)
		require.Contains(t, res.body, `id="consent"`)
		require.Contains(t, res.body, "can redirect or silence your alerts")
		require.Contains(t, res.body, `<input type="checkbox" name="grant" value="`+g+`"> Grant`, "listed unchecked")
		require.Contains(t, res.body, `<input type="hidden" name="grant" value="todos">`)
		require.Equal(t, 1, b.count(t, "endpoints"))
	}
	require.Contains(t, res.body, "can page you")

	// Confirmed with the box ticked: granted.
	res = c.once(c.post("/endpoints/vend", url.Values{"owner": {owner}, "name": {"pager"}, "consent": {"shown"}, "grant": {"todos", "notify_owner"}}), "credential_shown")
	_, ep, err = b.deps.Endpoints.Authenticate(b.ctx, between(t, res.body, `<code id="credential">`, "</code>"))
	require.NoError(t, err)
	require.Equal(t, []notifytype.Grant{"todos", "notify_owner"}, ep.Grants)
	// Confirmed with the box left unticked: not granted.
	res = c.once(c.post("/endpoints/vend", url.Values{"owner": {owner}, "name": {"cautious"}, "consent": {"shown"}, "grant": {"todos"}}), "credential_shown")
	_, ep, err = b.deps.Endpoints.Authenticate(b.ctx, between(t, res.body, `<code id="credential">`, "</code>"))
	require.NoError(t, err)
	require.Equal(t, []notifytype.Grant{"todos"}, ep.Grants)

	// A refused vend keeps the form.
	res = c.post("/endpoints/vend", url.Values{"owner": {owner}, "name": {"cautious"}, "grant": {"rules"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ := res.refusal(t)
	require.Equal(t, []string{"invalid_argument", "name"}, []string{code, field})
	require.Contains(t, res.body, `value="cautious"`)
	require.Contains(t, res.body, `<input type="checkbox" name="grant" value="todos">`, "todos unticked as typed")

	// Revoke.
	res = c.post("/endpoints/"+strconv.FormatInt(ep.ID, 10)+"/revoke", url.Values{"owner": {owner}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/endpoints?notice=endpoint_revoked&owner=human%3A"+strconv.FormatInt(id, 10), res.header.Get("Location"))
	_, _, err = b.deps.Endpoints.Authenticate(b.ctx, cred)
	require.NoError(t, err, "only the revoked endpoint stops")
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM endpoints WHERE revoked_at IS NOT NULL`))
}

func TestOpsPage(t *testing.T) {
	t.Parallel()
	attempts := make(chan engine.Attempt, 10)
	b := setup(t, func(c *engine.Config) {
		c.PollInterval = 20 * time.Millisecond
		c.OnAttempt = func(a engine.Attempt) { attempts <- a }
	})
	owner := b.f.Human("")
	c := b.login(t, owner)
	_, stranger := b.human(t) // sees only their own scopes' sinks: none (D26)
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	conn := b.gotifyConnection(t, owner, hostid.Human(owner), gotify.URL, "gtfya.ops")
	sink := b.gotifySink(t, owner, hostid.Human(owner), conn.ID, "ops-phone")
	b.f.Subscription(storetestSub(sink.ID))

	require.Contains(t, c.get("/ops").body, "a sink's sender with nothing to do stops after a while, and starts again")

	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- b.eng.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.NoError(t, b.f.InTx(func(tx pgx.Tx) error {
		return b.eng.Emit(b.ctx, tx, engine.Event{Type: engine.EventDigest, Owner: hostid.Human(owner)})
	}))
	select {
	case a := <-attempts:
		require.Equal(t, notifytype.ClassAuth, a.Class)
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt")
	}
	page := c.get("/ops")
	require.Equal(t, http.StatusOK, page.status)
	// The senders table names the sink, not its id (issue 25 item 7).
	actors := between(t, page.body, `id="actors"`, `</table>`)
	row := between(t, actors, `<a href="/sinks/`+strconv.FormatInt(sink.ID, 10)+`">ops-phone</a>`, "</tr>")
	require.Contains(t, row, ">auth</span></td>")
	require.NotContains(t, actors, "<td>"+strconv.FormatInt(sink.ID, 10)+"</td>")
	require.NotContains(t, page.body, "Tokens")
	require.Contains(t, page.body, ">ops-phone</a>", "the owner's own sink, by name, with its last delivery")
	strangers := stranger.get("/ops").body
	require.NotContains(t, strangers, "ops-phone", "no other tenant's names")
	require.Contains(t, strangers, `id="no-actors"`, "another scope's sink is not shown")
}

// TestEndpointNamesAreValidated: both vend forms refuse a NUL byte, a
// control character or a bidi override in the name with a 400 that names
// the field, never a 500, and store nothing.
func TestEndpointNamesAreValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, c := b.human(t)
	for _, name := range []string{"agent\x00", "agent\x1b[31m", "agent\u202etxt.exe", "\u200fagent"} {
		for _, path := range []string{"/endpoints/vend", "/endpoints/quick"} {
			res := c.post(path, url.Values{"name": {name}, "grant": {"todos"}})
			require.Equal(t, http.StatusBadRequest, res.status, "%s %q: %s", path, name, res.body)
			require.Contains(t, res.body, "name", "%s %q", path, name)
		}
	}
	require.Zero(t, b.count(t, "endpoints"))
}
