package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/sinks/sinktest"
)

// testAnswer is Send test's JSON answer (the form's script reads it).
type testAnswer struct {
	OK      bool
	Text    string
	Field   string
	Message string
}

// TestSinkFormFailedTestMarksItsField (issue 25 item 1): a failed Send
// test names the input to fix and says what to do there, for the sink's
// kind: a refused token is the Token, a 404 the base URL (never advice
// about an Apprise config key on a Gotify form), a missing token is "Not
// sent", not "Not saved"; without the script the page marks the input
// (aria-invalid, the message under it).
func TestSinkFormFailedTestMarksItsField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	human, c := b.human(t)
	status := http.StatusUnauthorized
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) })
	form := func(extra ...string) url.Values {
		v := url.Values{"owner": {hostid.Human(human).String()}, "name": {"phone"}, "kind": {"gotify"},
			"connection_id": {"new"}, "account_key": {gotify.URL}, "secret": {"gtfya.Wrong"}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	ask := func(f url.Values) testAnswer {
		t.Helper()
		res := c.post("/sinks/test", f, "Accept", "application/json")
		var a testAnswer
		require.NoError(t, json.Unmarshal([]byte(res.body), &a), res.body)
		return a
	}

	a := ask(form())
	require.False(t, a.OK)
	require.Equal(t, "secret", a.Field)
	require.Contains(t, a.Message, "Apps → your application")
	require.Contains(t, a.Text, "See Token below.")

	status = http.StatusNotFound
	a = ask(form())
	require.Equal(t, "account_key", a.Field)
	require.Contains(t, a.Message, "without /message")
	require.NotContains(t, a.Text+a.Message, "config key", "no Apprise advice on a Gotify form")

	a = ask(form("secret", ""))
	require.Equal(t, "secret", a.Field)
	require.True(t, strings.HasPrefix(a.Text, "Not sent: check Token below."), a.Text)

	// On a saved connection the token is not on the form: the picker is.
	conn := b.gotifyConnection(t, human, hostid.Human(human), gotify.URL, "gtfya.Saved")
	status = http.StatusForbidden
	a = ask(form("connection_id", itoa(conn.ID)))
	require.Equal(t, "connection_id", a.Field)

	// Without the script: the page, the input marked.
	status = http.StatusUnauthorized
	res := c.post("/sinks/test", form())
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, res.body, `id="conn-secret" type="password" autocomplete="off" spellcheck="false" autocapitalize="off" aria-invalid="true" aria-describedby="conn-secret-help error-secret"`)
	require.Contains(t, between(t, res.body, `<p class="field-error" id="error-secret">`, `</p>`), "Apps → your application")
	require.NotContains(t, res.body, "gtfya.Wrong", "the token is never sent back")
	require.NotContains(t, res.body, `id="refusal"`, "a failed test is not a refusal")
}

// TestSinkFormOneChoiceWithHelp (issue 25 item 1): the new-sink form
// offers one clear choice (no "create a connection first" above "a new one
// right here"), one line of help for each secret saying where it comes
// from, and the options a first sink does not need folded under Options.
func TestSinkFormOneChoiceWithHelp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	human, c := b.human(t)
	page := c.get("/sinks").body
	require.NotContains(t, page, "first.")
	require.Contains(t, page, "In Gotify: Apps → Create application → copy its token")
	require.Contains(t, page, `id="conn-apprise-help">The services Apprise should notify, as Apprise URLs`)
	require.Contains(t, page, `id="config-key-help">The key of a configuration saved on the Apprise API server`)
	opts := between(t, page, `<details class="options" id="sink-options">`, `</details>`)
	for _, name := range []string{"priority_low", "budget_per_hour", "budget_burst", "tag"} {
		require.Contains(t, opts, `name="`+name+`"`, "%s is folded under Options", name)
	}

	// With a connection: a picker of it or a new one, still no "first".
	b.gotifyConnection(t, human, hostid.Human(human), "https://gotify.example.net", "gtfya.x")
	page = c.get("/sinks").body
	require.Contains(t, page, `<option value="new">New connection…</option>`)
	require.NotContains(t, page, "first.")

	// A refusal about a folded option opens Options.
	res := c.post("/sinks", url.Values{"owner": {hostid.Human(human).String()}, "name": {"p"}, "kind": {"gotify"},
		"connection_id": {"new"}, "account_key": {"https://gotify.example.net"}, "secret": {"gtfya.y"}, "budget_burst": {"many"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, res.body, `<details class="options" id="sink-options" open>`)
}

// TestConnectionEdit (issue 25): a connection can be renamed, pointed
// elsewhere or given a new secret; blank secret fields keep the stored one,
// and no secret is ever shown, before or after a refusal.
func TestConnectionEdit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gotify := sinktest.NewServer(t, nil)
	human, c := b.human(t)
	me := hostid.Human(human)
	p := engine.HumanPrincipal(hostid.String(human))
	conn := b.gotifyConnection(t, human, me, gotify.URL, "gtfya.OldToken1")
	sink := b.gotifySink(t, human, me, conn.ID, "phone")
	path := "/connections/" + itoa(conn.ID) + "?owner=" + url.QueryEscape(me.String())

	require.Contains(t, c.get("/connections").body, `href="/connections/`+itoa(conn.ID)+`?owner=human%3a`, "each row links to its edit page")
	page := c.get(path)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `value="`+conn.Name+`"`)
	require.NotContains(t, page.body, "gtfya.OldToken1")
	require.Contains(t, page.body, "Leave blank to keep the stored token.")

	post := func(v url.Values) response {
		t.Helper()
		v.Set("owner", me.String())
		return c.post("/connections/"+itoa(conn.ID), v)
	}
	// Rename, secret blank: kept.
	res := post(url.Values{"name": {"home gotify"}, "account_key": {gotify.URL}, "secret": {""}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Contains(t, res.header.Get("Location"), "notice=connection_saved")
	conns, err := b.eng.ListConnections(b.ctx, p, me)
	require.NoError(t, err)
	require.Equal(t, "home gotify", conns[0].Name)
	_, err = b.eng.SendTestMessage(b.ctx, p, sink.ID)
	require.NoError(t, err)
	require.Equal(t, "gtfya.OldToken1", gotify.Requests()[0].Header.Get("X-Gotify-Key"), "a blank token keeps the stored one")

	// A new token replaces it.
	res = post(url.Values{"name": {"home gotify"}, "account_key": {gotify.URL}, "secret": {"gtfya.NewToken2"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	_, err = b.eng.SendTestMessage(b.ctx, p, sink.ID)
	require.NoError(t, err)
	require.Equal(t, "gtfya.NewToken2", gotify.Requests()[1].Header.Get("X-Gotify-Key"))
	require.NotContains(t, c.get(path).body, "gtfya.NewToken2", "never shown")

	// A refusal changes nothing, says which field, and echoes no secret.
	other := b.gotifyConnection(t, human, me, gotify.URL, "gtfya.z")
	res = post(url.Values{"name": {other.Name}, "account_key": {gotify.URL}, "secret": {"gtfya.Refused3"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ := res.refusal(t)
	require.Equal(t, "invalid_argument", code)
	require.Equal(t, "name", field)
	require.NotContains(t, res.body, "gtfya.Refused3")
	_, err = b.eng.SendTestMessage(b.ctx, p, sink.ID)
	require.NoError(t, err)
	require.Equal(t, "gtfya.NewToken2", gotify.Requests()[2].Header.Get("X-Gotify-Key"), "the refused token was not stored")

	// Someone else's connection is not found, and not changed.
	_, stranger := b.human(t)
	require.Equal(t, http.StatusNotFound, stranger.get(path).status)
	res = stranger.post("/connections/"+itoa(conn.ID), url.Values{"owner": {me.String()}, "name": {"mine now"}, "account_key": {gotify.URL}})
	require.Equal(t, http.StatusNotFound, res.status)
	conns, err = b.eng.ListConnections(b.ctx, p, me)
	require.NoError(t, err)
	require.Len(t, conns, 2)
	for _, cn := range conns {
		require.NotEqual(t, "mine now", cn.Name)
	}
}
