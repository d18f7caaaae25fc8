package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

// TestBoardPagesAreScopeChecked: the board pages every message links to
// (D13) answer behind the session, show the todo with its attempts and
// dead-letter history, and answer 404 for another scope's item (D3).
func TestBoardPagesAreScopeChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner, c := b.human(t)
	me := hostid.Human(owner)
	queue := b.f.Queue(me, "builds")
	ep := b.f.Endpoint(hosttest.EndpointOpts{Owner: me, Human: owner, Name: "builder", Grants: []string{"todos"}})
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly <build> failed", AttemptCap: 1})
	require.NoError(t, err)
	_, ok, err := b.deps.Todos.Claim(b.ctx, ep, queue)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.deps.Todos.Fail(b.ctx, ep, todo.ID, host.AttemptReport{Summary: "3 tests failed"})
	require.NoError(t, err)
	todoPath := "/board/todos/" + strconv.FormatInt(todo.ID, 10)

	// No session: the sign-in page, not the item.
	res := b.anon(t).get(todoPath)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/login?next="+url.QueryEscape(todoPath), res.header.Get("Location"))

	res = c.get(todoPath)
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, res.body, "Nightly &lt;build&gt; failed", "sender-written text is escaped")
	attempts := between(t, res.body, `<table id="attempts">`, "</table>")
	require.Contains(t, attempts, "builder")
	require.Contains(t, attempts, "failed")
	require.Contains(t, attempts, "3 tests failed")
	require.Contains(t, res.body, "fail at the cap")
	require.Contains(t, res.body, `id="requeue"`, "a dead todo can be re-queued from its page")

	res = c.get("/board/queues/builds")
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, res.body, `<a href="`+todoPath+`">Nightly &lt;build&gt; failed</a>`)
	require.Equal(t, http.StatusOK, c.get("/board/notifications").status)

	// Another human: every board page of the item is 404, exactly like an
	// item that does not exist, and their notifications list nothing of it.
	_, other := b.human(t)
	for _, path := range []string{todoPath, "/board/queues/builds", "/board/todos/999999", "/board/queues/nothing",
		"/board/queues/builds?owner=" + url.QueryEscape(me.String())} {
		res := other.get(path)
		require.Equal(t, http.StatusNotFound, res.status, path)
		require.NotContains(t, res.body, "Nightly", path)
	}
	require.NotContains(t, other.get("/board/notifications").body, "builds")
	res = other.post("/todos/"+strconv.FormatInt(todo.ID, 10)+"/requeue", nil)
	require.Equal(t, http.StatusNotFound, res.status)
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM todos WHERE state = 'dead'`))
}

// TestQueuePages: create a queue, enqueue, make it dead-letter and re-queue
// it from the web UI; refusals show under their field.
func TestQueuePages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)

	res := c.post("/queues", url.Values{"owner": {me.String()}, "name": {"deploys"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	qpath := strings.TrimSuffix(res.header.Get("Location"), "?notice=queue_created")
	require.Contains(t, c.get(res.header.Get("Location")).body, "Queue created.")

	// A taken name: refused under the name field, what was typed kept.
	res = c.post("/queues", url.Values{"owner": {me.String()}, "name": {"deploys"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ := res.refusal(t)
	require.Equal(t, []string{"invalid_argument", "name"}, []string{code, field})
	require.Contains(t, res.body, `id="queue-name" value="deploys" required maxlength="64" aria-invalid="true" aria-describedby="error-name"`)
	require.Contains(t, res.body, `<p class="field-error" id="error-name">This owner already has a queue called &#34;deploys&#34;.</p>`)

	res = c.post(qpath+"/todos", url.Values{"title": {""}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, `id="error-title"`)
	res = c.post(qpath+"/todos", url.Values{"title": {"roll out"}, "body": {"the details"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, qpath+"?notice=todo_enqueued", res.header.Get("Location"))
	todoID := b.f.Count(`SELECT max(id)::int FROM todos`)
	td := "/todos/" + strconv.Itoa(todoID)

	res = c.post(td+"/dead-letter", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, qpath+"?notice=todo_dead_lettered", res.header.Get("Location"))
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM todos WHERE state = 'dead' AND dead_reason = 'interrupted'`))
	require.Equal(t, 1, b.count(t, "outbox_events")+b.f.Count(`SELECT 1 - count(*)::int FROM switchboard.subscriptions`), "no subscription: nothing to announce")

	// Twice: the todo is dead, said in words on its page.
	res = c.post(td+"/dead-letter", nil)
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, "only a pending or claimed todo can be interrupted")
	banner := between(t, res.body, `id="refusal"`, "</div>")
	require.Contains(t, banner[strings.Index(banner, ">")+1:], "Could not do that. The todo is dead;")
	require.NotContains(t, banner[strings.Index(banner, ">")+1:], "todo_id", "no internal field names")

	res = c.post(td+"/requeue", url.Values{"back": {"board"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/board/todos/"+strconv.Itoa(todoID)+"?notice=todo_requeued", res.header.Get("Location"))
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM todos WHERE state = 'pending'`))

	// A team member lists the team's queues but may not create one.
	team := b.f.Team("Platform")
	b.f.Member(team, id, "member")
	res = c.get("/queues?owner=" + url.QueryEscape(hostid.Team(team).String()))
	require.Equal(t, http.StatusOK, res.status)
	require.NotContains(t, res.body, `id="create-queue"`)
	res = c.post("/queues", url.Values{"owner": {hostid.Team(team).String()}, "name": {"x"}})
	require.Equal(t, http.StatusForbidden, res.status)
	require.Zero(t, b.f.Count(`SELECT count(*) FROM queues WHERE name = 'x'`))
}

// TestNamesNotIds: pages name the human and their teams, offer a picker
// of the human's own scopes, and list the scope's queues and endpoints by
// name as subscription filters.
func TestNamesNotIds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.f.Human("Ada Lovelace")
	c := b.login(t, id)
	me := hostid.Human(id)
	team := b.f.Team("Night Shift")
	b.f.Member(team, id, "admin")
	b.f.Queue(me, "builds")
	b.f.Queue(me, "deploys")
	b.f.Endpoint(hosttest.EndpointOpts{Owner: me, Human: id, Name: "ci-agent"})
	b.f.Queue(hostid.Team(team), "team-only")
	gotify := sinktest.NewServer(t, nil)
	sink := b.gotifySink(t, id, me, b.gotifyConnection(t, id, me, gotify.URL, "gtfya.n").ID, "phone")

	page := c.get("/sinks").body
	require.Contains(t, page, "Sinks of Ada Lovelace (")
	picker := between(t, page, `<select name="owner" id="scope-picker">`, "</select>")
	require.Contains(t, picker, ">Me (Ada Lovelace)</option>")
	require.Contains(t, picker, `value="team:`+strconv.FormatInt(team, 10)+`"`)
	require.Contains(t, picker, ">Team Night Shift (admin)</option>")
	require.Contains(t, c.get("/sinks?owner=team:"+strconv.FormatInt(team, 10)).body, "<h2>Sinks of Night Shift</h2>")

	path := "/sinks/" + strconv.FormatInt(sink.ID, 10)
	page = c.get(path).body
	require.Contains(t, page, "<dd>Ada Lovelace (")
	filters := between(t, page, `<fieldset class="filters">`, "</fieldset>")
	require.Contains(t, filters, "> builds</label>")
	require.Contains(t, filters, "> deploys</label>")
	require.Contains(t, filters, "> ci-agent</label>")
	require.NotContains(t, filters, "team-only", "only the sink's own scope")

	builds := b.f.Count(`SELECT id::int FROM queues WHERE name = 'builds'`)
	deploys := b.f.Count(`SELECT id::int FROM queues WHERE name = 'deploys'`)
	res := c.post(path+"/subscriptions", url.Values{"event_types": {"todo.dead_lettered"},
		"queues": {strconv.Itoa(builds), strconv.Itoa(deploys)}, "min_severity": {"low"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, path+"?notice=subscription_added", res.header.Get("Location"))
	page = c.get(res.header.Get("Location")).body
	require.Contains(t, page, "Subscription added.")
	require.Contains(t, between(t, page, `<table id="subscriptions">`, "</table>"), `<td data-label="Queues">builds, deploys</td>`)

	// A queue of another scope, named by id, is refused under the filter.
	res = c.post(path+"/subscriptions", url.Values{"event_types": {"todo.dead_lettered"},
		"queues": {strconv.Itoa(b.f.Count(`SELECT id::int FROM queues WHERE name = 'team-only'`))}})
	require.Equal(t, http.StatusBadRequest, res.status, res.body)
	require.Contains(t, res.body, `id="error-queues"`)
}

// TestErrorsUnderTheirFields: a refused form marks the field it is about
// and says why under it; the banner speaks in words, not internal field
// names; what was typed comes back, except secrets and a base URL's user
// info.
func TestErrorsUnderTheirFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	const canary = "canary-Hunter2-0451"

	res := c.post("/connections", url.Values{"owner": {me.String()}, "kind": {"gotify"}, "name": {"home"},
		"account_key": {"https://me:" + canary + "@gotify.example.net/base?x=1"}, "secret": {"gtfya." + canary}})
	require.Equal(t, http.StatusBadRequest, res.status, res.body)
	code, field, _ := res.refusal(t)
	require.Equal(t, []string{"invalid_argument", "account_key"}, []string{code, field})
	require.NotContains(t, res.body, canary, "neither the password in the URL nor the token is typed back")
	require.Contains(t, res.body, `id="conn-url" value="https://gotify.example.net/base?x=1"`)
	require.Contains(t, res.body, `aria-invalid="true" aria-describedby="error-account_key"`)
	require.Contains(t, res.body, `<p class="field-error" id="error-account_key">`)
	require.Contains(t, res.body, `value="home"`)
	banner := between(t, res.body, `id="refusal"`, "</div>")
	banner = banner[strings.Index(banner, ">")+1:]
	require.Contains(t, banner, "Not saved: check Server base URL below.")
	require.NotContains(t, banner, "account_key")

	// A sink option: the Gotify priority field is marked.
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.x")
	res = c.post("/sinks", url.Values{"owner": {me.String()}, "name": {"phone"}, "kind": {"gotify"},
		"connection_id": {strconv.FormatInt(conn.ID, 10)}, "priority_high": {"99"}})
	require.Equal(t, http.StatusBadRequest, res.status, res.body)
	require.Contains(t, res.body, `name="priority_high" inputmode="numeric" size="3" value="99" aria-invalid="true"`)
	require.Contains(t, res.body, `id="error-priority_high"`)
	banner = between(t, res.body, `id="refusal"`, "</div>")
	require.Contains(t, banner, "Not saved: check Priority for high below.")
	require.NotContains(t, banner[strings.Index(banner, ">")+1:], "options.priorities")
}

// TestConfirmBeforeDelete: every Delete and Revoke button leads to a
// confirmation page (no JavaScript needed) that changes nothing until its
// own button posts.
func TestConfirmBeforeDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	conn := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.c")
	spare := b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.s")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")
	sub, err := b.eng.AddSubscription(b.ctx, engine.HumanPrincipal(hostid.String(id)), sink.ID, engine.SubscriptionInput{
		EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	require.NoError(t, err)
	ep, _, err := b.deps.Endpoints.Vend(b.ctx, id, me, "agent", nil)
	require.NoError(t, err)
	sinkPath := "/sinks/" + strconv.FormatInt(sink.ID, 10)
	owner := "?owner=" + url.QueryEscape(me.String())

	page := c.get(sinkPath).body
	require.Contains(t, page, `<a class="button danger" href="`+sinkPath+`/delete" id="delete">`)
	require.NotContains(t, page, `action="`+sinkPath+`/delete"`, "no one-click delete")
	for path, action := range map[string]string{
		sinkPath + "/delete": sinkPath + "/delete",
		sinkPath + "/subscriptions/" + strconv.FormatInt(sub.ID, 10) + "/delete": sinkPath + "/subscriptions/" + strconv.FormatInt(sub.ID, 10) + "/delete",
		"/connections/" + strconv.FormatInt(spare.ID, 10) + "/delete" + owner:    "/connections/" + strconv.FormatInt(spare.ID, 10) + "/delete",
		"/endpoints/" + strconv.FormatInt(ep.ID, 10) + "/revoke" + owner:         "/endpoints/" + strconv.FormatInt(ep.ID, 10) + "/revoke",
	} {
		res := c.get(path)
		require.Equal(t, http.StatusOK, res.status, path)
		require.Contains(t, res.body, `<form method="post" action="`+action+`" class="actions row" id="confirm">`, path)
	}
	require.Equal(t, 1, b.count(t, "sinks"))
	require.Equal(t, 1, b.count(t, "subscriptions"))
	require.Equal(t, 2, b.count(t, "connections"))
	require.Zero(t, b.f.Count(`SELECT count(*) FROM endpoints WHERE revoked_at IS NOT NULL`))

	// Another human's items have no confirmation page either.
	_, other := b.human(t)
	require.Equal(t, http.StatusNotFound, other.get(sinkPath+"/delete").status)
	require.Equal(t, http.StatusNotFound, other.get("/endpoints/"+strconv.FormatInt(ep.ID, 10)+"/revoke").status)

	res := c.post(sinkPath+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Contains(t, c.get(res.header.Get("Location")).body, "Sink deleted. Its delivery records are kept.")
}

// TestStyledNotFound: an unknown page is the layout's 404, with the menu
// for a signed-in human.
func TestStyledNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, c := b.human(t)
	res := b.anon(t).get("/no/such/page")
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, res.header.Get("Content-Type"), "text/html")
	require.Contains(t, res.body, `<link rel="stylesheet" href="/static/style.css">`)
	require.Contains(t, res.body, "<h1>Page not found</h1>")
	require.NotContains(t, res.body, `<nav aria-label="Main"`)
	res = c.get("/no/such/page")
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, res.body, `<nav aria-label="Main"`)
}

// TestPrivateAddressWarning: a connection whose base URL resolves to a
// private or loopback address is saved with a warning naming the setting
// that allows it; an allowed or public address saves without one.
func TestPrivateAddressWarning(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *engine.Config) { c.PrivateHosts = nil })
	id, c := b.human(t)
	me := hostid.Human(id)
	save := func(name, base string) response {
		t.Helper()
		res := c.post("/connections", url.Values{"owner": {me.String()}, "kind": {"gotify"}, "name": {name},
			"account_key": {base}, "secret": {"gtfya.w"}})
		require.Equal(t, http.StatusSeeOther, res.status, res.body)
		return c.get(res.header.Get("Location"))
	}
	page := save("local", "http://127.0.0.1:8181")
	require.Contains(t, page.body, "Connection created.")
	warning := between(t, page.body, `id="warning">`, "</p>")
	require.Contains(t, warning, "127.0.0.1")
	require.Contains(t, warning, "SWITCHBOARD_PRIVATE_HOSTS")
	page = save("lan", "https://10.1.2.3")
	require.Contains(t, page.body, `id="warning"`)
	page = save("public", "https://93.184.216.34")
	require.NotContains(t, page.body, `id="warning"`)
	require.Equal(t, 3, b.count(t, "connections"), "saving is allowed either way")
	require.NotContains(t, c.get("/connections").body, `id="warning"`, "only right after the save")
}

// TestSinkOnAPrivateConnectionWarns: a sink saved (created or edited) on
// a connection whose base URL the guard will refuse shows the same
// warning right after the save, and only then; one on a public address
// shows none.
func TestSinkOnAPrivateConnectionWarns(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *engine.Config) { c.PrivateHosts = nil })
	id, c := b.human(t)
	me := hostid.Human(id)
	private := b.gotifyConnection(t, id, me, "http://127.0.0.1:8181", "gtfya.p")
	public := b.gotifyConnection(t, id, me, "https://93.184.216.34", "gtfya.q")
	create := func(name string, conn int64) (page response, sinkURL string) {
		t.Helper()
		res := c.post("/sinks", url.Values{"owner": {me.String()}, "name": {name}, "kind": {"gotify"},
			"connection_id": {strconv.FormatInt(conn, 10)}})
		require.Equal(t, http.StatusSeeOther, res.status, res.body)
		loc := res.header.Get("Location")
		return c.get(loc), strings.SplitN(loc, "?", 2)[0]
	}
	page, sinkURL := create("desk", private.ID)
	require.Contains(t, page.body, "Sink created.")
	warning := between(t, page.body, `id="warning">`, "</p>")
	require.Equal(t, warnings.Destination(b.ctx, b.eng, "http://127.0.0.1:8181"), html.UnescapeString(warning))
	page, _ = create("phone", public.ID)
	require.NotContains(t, page.body, `id="warning"`)

	require.NotContains(t, c.get(sinkURL).body, `id="warning"`, "only right after the save")
	res := c.post(sinkURL, url.Values{"name": {"desk-2"}, "connection_id": {strconv.FormatInt(private.ID, 10)}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Contains(t, c.get(res.header.Get("Location")).body, `id="warning"`, "an edit warns too")
}

// TestVendShowsClientConfig: after vending, the page shows the MCP URL and
// a ready client configuration holding the credential.
func TestVendShowsClientConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, c := b.human(t)
	res := c.once(c.post("/endpoints/quick", nil), "credential_shown")
	cred := between(t, res.body, `<code id="credential">`, "</code>")
	require.True(t, strings.HasPrefix(cred, "sbe_"))
	require.Contains(t, res.body, `<code id="mcp-url">`+b.srv.URL+`/mcp</code>`)
	cfg := between(t, res.body, `<code id="client-config">`, "</code>")
	require.Contains(t, cfg, "&#34;url&#34;: &#34;"+b.srv.URL+"/mcp&#34;")
	require.Contains(t, cfg, "&#34;Authorization&#34;: &#34;Bearer "+cred+"&#34;")
	require.Contains(t, res.body, `<script src="/static/copy.js"></script>`)
	js := c.get("/static/copy.js")
	require.Equal(t, http.StatusOK, js.status)
	require.Contains(t, js.body, "navigator.clipboard")
}

// TestOpsShowsLastDeliveryFromTheDatabase: with no actor running, the ops
// page says why, and shows each of the human's sinks with its last
// delivery state read from the database.
func TestOpsShowsLastDeliveryFromTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	me := hostid.Human(id)
	down := b.gotifySink(t, id, me, b.gotifyConnection(t, id, me, sinktest.RefusedURL(t), "gtfya.o").ID, "pager")
	_, err := b.eng.SendTestMessage(b.ctx, engine.HumanPrincipal(hostid.String(id)), down.ID)
	require.NoError(t, err)
	b.gotifySink(t, id, me, b.gotifyConnection(t, id, me, "https://gotify.example.net", "gtfya.q").ID, "quiet")

	other := b.f.Human("")
	b.gotifySink(t, other, hostid.Human(other), b.gotifyConnection(t, other, hostid.Human(other), "https://gotify.example.net", "gtfya.x").ID, "someone-elses")

	page := c.get("/ops").body
	require.Contains(t, page, `id="no-actors"`)
	require.Contains(t, page, "stops after a while")
	states := between(t, page, `<table id="sink-states">`, "</table>")
	pager := between(t, states, ">pager</a>", "</tr>")
	require.Contains(t, pager, "<strong>undeliverable</strong>, class <strong")
	require.Contains(t, pager, ">network</strong>")
	require.Contains(t, between(t, states, ">quiet</a>", "</tr>"), "nothing sent yet")
	require.NotContains(t, page, "someone-elses")
}

// TestSignInLandsOnTheBoardLink: a signed-out human who follows a
// message's board link signs in and lands on that page, not on /sinks; a
// remembered destination is only ever a path of this site.
func TestSignInLandsOnTheBoardLink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.f.Human("")
	c := b.anon(t)
	res := c.get("/board/notifications")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/login?next=%2Fboard%2Fnotifications", res.header.Get("Location"))
	res = c.post("/login/"+b.loginLink(t, id), nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/board/notifications", res.header.Get("Location"))
	require.Equal(t, http.StatusOK, c.get("/board/notifications").status)

	// Spent: the next sign-in goes to /sinks.
	res = c.post("/login/"+b.loginLink(t, id), nil)
	require.Equal(t, "/sinks", res.header.Get("Location"))

	// A planted cookie naming another site is ignored.
	u, err := url.Parse(b.srv.URL + "/login")
	require.NoError(t, err)
	other := b.anon(t)
	other.http.Jar.SetCookies(u, []*http.Cookie{{Name: "sb_next", Value: "//evil.example/x", Path: "/login"}})
	res = other.post("/login/"+b.loginLink(t, id), nil)
	require.Equal(t, "/sinks", res.header.Get("Location"))
}

// TestSinkGuidedStart: the new-sink form creates its connection inline
// and tries the destination before anything is saved (issue 19 item 8).
// Send test goes through the guarded client and stores nothing; the token
// is never sent back; a refused sink leaves no connection behind.
func TestSinkGuidedStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	human, c := b.human(t)
	const token = "gtfya.GuidedStartToken9"
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"id":1}`)) })
	form := func(extra ...string) url.Values {
		v := url.Values{"owner": {hostid.Human(human).String()}, "name": {"phone"}, "kind": {"gotify"}, "enabled": {"1"},
			"connection_id": {"new"}, "conn_name": {"home gotify"}, "account_key": {gotify.URL}, "secret": {token}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	nothingStored := func(what string) {
		t.Helper()
		require.Zero(t, b.count(t, "connections"), what)
		require.Zero(t, b.count(t, "sinks"), what)
		require.Zero(t, b.count(t, "delivery_records"), what)
	}

	// The page offers it: a new connection inside the sink form, Send test.
	page := c.get("/sinks")
	require.Contains(t, page.body, `<input type="hidden" name="connection_id" value="new">`, "with no connection yet, a new one is the only choice")
	require.NotContains(t, page.body, `id="sink-connection"`, "no picker with nothing to pick")
	require.NotContains(t, page.body, "connection</a> first", "one clear choice, not 'create a connection first' above 'a new one right here'")
	require.Contains(t, page.body, `id="test-sink-button"`)
	require.Contains(t, page.body, `<fieldset data-kind="gotify">`, "each kind's options say their kind, for the script to hide the others")
	require.Contains(t, page.body, `<script src="/static/sinkform.js"></script>`)
	require.Equal(t, http.StatusOK, c.get("/static/sinkform.js").status, "the script is served")

	// Send test, as a plain form post: the page says it arrived; nothing is
	// stored and the token is not sent back.
	res := c.post("/sinks/test", form())
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, between(t, res.body, `id="test-result"`, `</p>`), "Test message delivered")
	require.NotContains(t, res.body, token)
	require.Contains(t, res.body, `value="home gotify"`, "the rest of the form is kept")
	reqs := gotify.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, token, reqs[0].Header.Get("X-Gotify-Key"))
	require.Contains(t, string(reqs[0].Body), sinks.TestTitle)
	nothingStored("a test stores nothing")

	// As the page's script sends it: JSON, so the form keeps the token.
	res = c.post("/sinks/test", form(), "Accept", "application/json")
	require.Equal(t, http.StatusOK, res.status, res.body)
	var answer struct {
		OK   bool
		Text string
	}
	require.NoError(t, json.Unmarshal([]byte(res.body), &answer))
	require.True(t, answer.OK, answer.Text)
	require.NotContains(t, res.body, token)

	// A destination the guard refuses is not tried, and says why.
	res = c.post("/sinks/test", form("account_key", "http://169.254.169.254/latest"), "Accept", "application/json")
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.NoError(t, json.Unmarshal([]byte(res.body), &answer))
	require.False(t, answer.OK)
	require.Contains(t, answer.Text, "(blocked)")
	require.Len(t, gotify.Requests(), 2, "nothing reached the stand-in")

	// A base URL that is not one: refused under its field.
	res = c.post("/sinks/test", form("account_key", "ftp://push.example.net"))
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, `id="error-account_key"`)
	nothingStored("refused tests store nothing")

	// A sink refused (no name) after its new connection was accepted:
	// the connection is not kept either.
	res = c.post("/sinks", form("name", ""))
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, `id="error-name"`)
	require.NotContains(t, res.body, token)
	nothingStored("a refused sink leaves no connection")

	// A connection name taken: said under Connection name, not Name.
	b.gotifyConnection(t, human, hostid.Human(human), gotify.URL, "gtfya.other")
	conns := b.count(t, "connections")
	existing, err := b.eng.ListConnections(b.ctx, engine.HumanPrincipal(hostid.String(human)), hostid.Human(human))
	require.NoError(t, err)
	res = c.post("/sinks", form("conn_name", existing[0].Name))
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, `id="error-conn_name"`)
	require.Equal(t, conns, b.count(t, "connections"))

	// Created: the connection and the sink in one submit.
	res = c.post("/sinks", form())
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, conns+1, b.count(t, "connections"))
	require.Equal(t, 1, b.count(t, "sinks"))
	require.False(t, strings.Contains(b.logs.String(), token), "the token never reaches a log")
}

// TestSubscriptionFormInWords: event types are offered in words with what
// each means, and rule.notify is not offered (a rule names its sink).
func TestSubscriptionFormInWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	human, c := b.human(t)
	me := hostid.Human(human)
	conn := b.gotifyConnection(t, human, me, "https://push.example.net", "gtfya.words")
	sink := b.gotifySink(t, human, me, conn.ID, "phone")
	page := c.get("/sinks/" + itoa(sink.ID))
	form := between(t, page.body, `id="add-subscription"`, `</form>`)
	for _, typ := range []notifytype.EventType{host.EventTodoDeadLettered, host.EventDeliveryQuarantined, engine.EventDigest} {
		require.Contains(t, form, `value="`+string(typ)+`"`)
		kind, ok := host.KindOf(typ)
		require.True(t, ok, typ)
		require.Contains(t, form, "<strong>"+kind.Words+"</strong>")
	}
	require.Contains(t, form, "a todo failed for good")
	require.NotContains(t, form, `value="rule.notify"`, "rule.notify goes to the sink a rule names")
	require.Contains(t, form, "Routing rules notify a sink by its name")
}
