package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/web"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/sinks/sinktest"
)

// gotifyMessage is what a Gotify stand-in received.
type gotifyMessage struct {
	Title, Message string
	Extras         map[string]map[string]any
}

func gotifyMessages(t *testing.T, srv *sinktest.Server) []gotifyMessage {
	t.Helper()
	var out []gotifyMessage
	for _, r := range srv.Requests() {
		var m gotifyMessage
		require.NoError(t, json.Unmarshal(r.Body, &m))
		out = append(out, m)
	}
	return out
}

// askSignInLink posts "send me a sign-in link" and waits for the send it
// started (it runs after the answer).
func askSignInLink(t *testing.T, c *client, email, next string) response {
	t.Helper()
	res := c.post("/login", url.Values{"email": {email}, "next": {next}})
	web.WaitSignInSends()
	return res
}

// TestSignInLinkBySinkReturnsToTheItem (issue 25 item 2): a signed-out
// person who opens a board link from their phone asks for a sign-in link
// by email; it arrives through their own sink (a tap opens it), signs them
// in once and lands them on the item they asked for. The answer is the
// same for an unknown email, and nothing is sent for it.
func TestSignInLinkBySinkReturnsToTheItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gotify := sinktest.NewServer(t, nil)
	const token = "gtfya.SignInToken1"
	id := b.f.Human("Ada Lovelace")
	me := hostid.Human(id)
	hum, err := hoststore.HumanByID(b.ctx, b.pool, id)
	require.NoError(t, err)
	conn := b.gotifyConnection(t, id, me, gotify.URL, token)
	b.gotifySink(t, id, me, conn.ID, "phone")
	// A team's sink and a disabled sink of theirs get nothing: the link
	// goes only to the person's own enabled sinks.
	teamGotify := sinktest.NewServer(t, nil)
	team := b.f.Team("night shift")
	b.f.Member(team, id, "owner")
	tc := b.gotifyConnection(t, id, hostid.Team(team), teamGotify.URL, "gtfya.Team")
	b.gotifySink(t, id, hostid.Team(team), tc.ID, "team phone")
	off := b.gotifySink(t, id, me, b.gotifyConnection(t, id, me, teamGotify.URL, "gtfya.Off").ID, "old phone")
	_, err = b.eng.SetSinkEnabled(b.ctx, engine.HumanPrincipal(hostid.String(id)), off.ID, false)
	require.NoError(t, err)
	queue := b.f.Queue(me, "builds")
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build failed"})
	require.NoError(t, err)
	item := "/board/todos/" + itoa(todo.ID)

	// The board link, signed out: the sign-in page, which remembers it.
	phone := b.anon(t)
	res := phone.get(item)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/login?next="+url.QueryEscape(item), res.header.Get("Location"))
	page := phone.get(res.header.Get("Location"))
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, `id="sign-in-link-form"`)
	require.Contains(t, page.body, `<input type="hidden" name="next" value="`+item+`">`)

	// Ask, typing the email as a phone keyboard does (a capital first).
	typed := strings.ToUpper(hum.Email[:1]) + hum.Email[1:]
	asked := askSignInLink(t, phone, typed, item)
	require.Equal(t, http.StatusSeeOther, asked.status, asked.body)
	require.Equal(t, "/login/sent?next="+url.QueryEscape(item), asked.header.Get("Location"))
	sent := phone.get(asked.header.Get("Location"))
	require.Equal(t, http.StatusOK, sent.status)
	require.Contains(t, sent.body, "a <strong>sign-in link</strong> is on its way")
	require.Regexp(t, `until \d\d:\d\d UTC`, sent.body, "when it stops working, with its zone")

	msgs := gotifyMessages(t, gotify)
	require.Len(t, msgs, 1, "one message, to the human's own sink")
	require.Empty(t, teamGotify.Requests(), "never a team's sink or a disabled one")
	m := msgs[0]
	require.Equal(t, "Sign in to Switchboard", m.Title)
	require.Regexp(t, `It works once, until \d\d:\d\d UTC\.`, m.Message)
	click, _ := m.Extras["client::notification"]["click"].(map[string]any)
	link := asString(click["url"])
	require.Regexp(t, `^`+regexp.QuoteMeta(b.srv.URL)+`/login/sbl_[A-Za-z0-9_-]+\?next=`+regexp.QuoteMeta(url.QueryEscape(item))+`$`, link)
	require.Contains(t, m.Message, "[Sign in]("+link+")")
	require.NotContains(t, m.Message+m.Title, token, "no secret but the link travels")
	require.Equal(t, token, gotify.Requests()[0].Header.Get("X-Gotify-Key"))
	require.NotContains(t, b.logs.String(), "sbl_", "the link is never logged")

	// The sink's page lists it, without the link.
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.delivery_records WHERE event_type = 'sign_in_link' AND status = 'delivered'`))

	// The tap: a page whose button signs in (a previewer spends nothing),
	// then the item.
	u, err := url.Parse(link)
	require.NoError(t, err)
	confirm := phone.get(u.RequestURI())
	require.Equal(t, http.StatusOK, confirm.status)
	require.Contains(t, confirm.body, `<input type="hidden" name="next" value="`+item+`">`)
	in := phone.post(u.Path, url.Values{"next": {item}})
	require.Equal(t, http.StatusSeeOther, in.status, in.body)
	require.Equal(t, item, in.header.Get("Location"))
	got := phone.get(item)
	require.Equal(t, http.StatusOK, got.status)
	require.Contains(t, got.body, "Nightly build failed")
	// Once only.
	require.Equal(t, http.StatusNotFound, b.anon(t).post(u.Path, nil).status)

	// An unknown email: the same answer, and nothing minted or sent.
	links := b.f.Count(`SELECT count(*) FROM login_links`)
	other := askSignInLink(t, b.anon(t), "nobody@example.net", item)
	require.Equal(t, asked.status, other.status)
	require.Equal(t, asked.header.Get("Location"), other.header.Get("Location"))
	require.Equal(t, links, b.f.Count(`SELECT count(*) FROM login_links`))
	require.Len(t, gotify.Requests(), 1)

	// A human without a sink: the same answer, nothing minted.
	loner := b.f.Human("")
	lonerHum, err := hoststore.HumanByID(b.ctx, b.pool, loner)
	require.NoError(t, err)
	res = askSignInLink(t, b.anon(t), lonerHum.Email, "")
	require.Equal(t, "/login/sent", res.header.Get("Location"))
	require.Equal(t, links, b.f.Count(`SELECT count(*) FROM login_links`))
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// TestSignInLinkRateLimited: "send me a sign-in link" is limited per
// email (silently: the answer stays the same, so it tells nothing of the
// email) and per client address (a visible 429 that says to wait); a
// human gets at most 3 links within 15 minutes, however they are asked.
func TestSignInLinkRateLimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gotify := sinktest.NewServer(t, nil)
	id := b.f.Human("")
	me := hostid.Human(id)
	hum, err := hoststore.HumanByID(b.ctx, b.pool, id)
	require.NoError(t, err)
	conn := b.gotifyConnection(t, id, me, gotify.URL, "gtfya.x")
	b.gotifySink(t, id, me, conn.ID, "phone")

	c := b.anon(t)
	for i := range 4 {
		res := askSignInLink(t, c, hum.Email, "")
		require.Equal(t, http.StatusSeeOther, res.status, "request %d", i+1)
		require.Equal(t, "/login/sent", res.header.Get("Location"), "the same answer, limited or not")
	}
	require.Len(t, gotify.Requests(), 3, "three links for one email, then none")
	require.Equal(t, 3, b.f.Count(`SELECT count(*) FROM login_links`))

	// The database caps a human's links too (several instances each
	// have their own per-email limit).
	_, _, ok, err := b.accounts.MintLoginLinkCapped(b.ctx, id, 3)
	require.NoError(t, err)
	require.False(t, ok, "a fourth link within 15 minutes")

	// The address has spent 4 of its 5: one more, then 429.
	res := askSignInLink(t, c, "someone@example.net", "")
	require.Equal(t, http.StatusSeeOther, res.status)
	res = askSignInLink(t, c, "someone-else@example.net", "")
	require.Equal(t, http.StatusTooManyRequests, res.status)
	require.NotEmpty(t, res.header.Get("Retry-After"))
	code, field, _ := res.refusal(t)
	require.Equal(t, "rate_limited", code)
	require.Empty(t, field)

	// A malformed email is refused under its field, and sends nothing.
	res = b.anon(t).post("/login", url.Values{"email": {"not-an-email"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ = res.refusal(t)
	require.Equal(t, "invalid_argument", code)
	require.Equal(t, "email", field)
	require.Contains(t, res.body, `aria-invalid="true" aria-describedby="error-email"`)
	require.Len(t, gotify.Requests(), 3)
}

// TestSignInNextStaysOnThisSite: the page a sign-in returns to is only
// ever a path of this site: a protocol-relative URL, a backslash a browser
// reads as a slash, an absolute URL, a scheme, a tab or newline a browser
// drops, and the sign-in pages themselves all land on /sinks, whether they
// come in the form, the login page's query or the remembered cookie.
func TestSignInNextStaysOnThisSite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.f.Human("")
	for _, next := range []string{
		"//evil.example", "//evil.example/board/todos/1", "/\\evil.example", "/\\/evil.example", "\\\\evil.example",
		"https://evil.example/", "http:evil.example", "HTTPS://evil.example", "javascript:alert(1)",
		"/\t/evil.example", "/\n/evil.example", "/%0a", " /sinks", "evil.example", "board/todos/1",
		"/login/sbl_x", "/logout", "/login", "/" + strings.Repeat("a", 600), "/\u2028/evil.example",
	} {
		res := b.anon(t).post("/login/"+b.loginLink(t, id), url.Values{"next": {next}})
		require.Equal(t, http.StatusSeeOther, res.status, "%q", next)
		loc := res.header.Get("Location")
		if next == "/%0a" {
			require.Equal(t, "/%0a", loc, "an escaped byte is a path of this site")
			continue
		}
		require.Equal(t, "/sinks", loc, "next %q", next)

		page := b.anon(t).get("/login?next=" + url.QueryEscape(next))
		require.Equal(t, http.StatusOK, page.status)
		require.NotContains(t, page.body, `name="next"`, "next %q is not carried on", next)

		c := b.anon(t)
		u, err := url.Parse(b.srv.URL + "/login")
		require.NoError(t, err)
		c.http.Jar.SetCookies(u, []*http.Cookie{{Name: "sb_next", Value: url.QueryEscape(next), Path: "/login"}})
		res = c.post("/login/"+b.loginLink(t, id), nil)
		require.Equal(t, "/sinks", res.header.Get("Location"), "cookie %q", next)
	}
	// A path of this site, with its query, is followed.
	res := b.anon(t).post("/login/"+b.loginLink(t, id), url.Values{"next": {"/board/notifications?sink=3"}})
	require.Equal(t, "/board/notifications?sink=3", res.header.Get("Location"))
	// Signed in already: /login goes straight to next.
	c := b.login(t, id)
	require.Equal(t, "/board/notifications", c.get("/login?next=%2Fboard%2Fnotifications").header.Get("Location"))
	require.Equal(t, "/sinks", c.get("/login?next=%2F%2Fevil.example").header.Get("Location"))
}

// TestFaviconServed: /favicon.ico is an icon, not a 404 (issue 25).
func TestFaviconServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.anon(t).get("/favicon.ico")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "image/x-icon", res.header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(res.body, "\x00\x00\x01\x00"), "an ICO file")
	require.Contains(t, b.anon(t).get("/login").body, `<link rel="icon" href="/favicon.ico"`)
}
