package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/web"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/sinks/sinktest"
)

// eval runs a script on the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

// displayOf is the computed display of the element matching sel, or of
// its nearest ancestor whose display is none ("none" then): what a person
// sees, whatever rule set it.
func displayOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, `(() => {
		let e = document.querySelector(`+jsString(sel)+`);
		if (!e) return "missing";
		const own = getComputedStyle(e).display;
		for (; e; e = e.parentElement) if (getComputedStyle(e).display === "none") return "none";
		return own;
	})()`)
}

// shown reports whether a person sees the element matching sel: rendered
// (no display: none on it or above it) and not inside a closed details
// (checkVisibility; a closed details' content keeps its boxes).
func shown(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	return eval[bool](t, ctx, `(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.checkVisibility({visibilityProperty: true}); })()`)
}

// requireTablesFit asserts, at a phone's width, that no table is wider
// than its box (its scroll wrapper or parent) or the screen, where it
// would be cut off with no cue (issue 25 item 8), and that every stacked
// cell with text names its column (data-label).
func requireTablesFit(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	cut := eval[[]string](t, ctx, `[...document.querySelectorAll("main table")].filter(tb => {
		const box = tb.closest(".scroll") || tb.parentElement;
		return tb.getBoundingClientRect().width > box.clientWidth + 1 || box.scrollWidth > box.clientWidth + 1
			|| tb.getBoundingClientRect().right > document.documentElement.clientWidth + 1;
	}).map(tb => tb.id || tb.className || "table")`)
	require.Empty(t, cut, "%s: tables wider than their box", where)
	unlabelled := eval[[]string](t, ctx, `[...document.querySelectorAll("main table tbody td")].filter(td =>
		td.textContent.trim() !== "" && !td.querySelector("a.button, button") && !td.dataset.label).map(td => td.textContent.trim().slice(0, 30))`)
	require.Empty(t, unlabelled, "%s: stacked cells without their column's name", where)
}

// TestBrowserFormsPhoneAndSignIn walks issue 25's items 1, 2 and 8 and
// its connection, zone and favicon items in headless Chromium: the guided
// sink form shows only the chosen kind's fields (by computed style), a
// help line for each secret, one clear choice and Options folded, and a
// failed test marks the field it names; at 375 px every table fits its box
// (stacked rows with their column names), the Sinks state pill and the Ops
// "When" read whole, and the menu is one short bar; a signed-out phone
// asks for a sign-in link, gets it through its own sink and lands on the
// board item it opened; a connection is renamed; /favicon.ico is an icon.
// axe-core finds nothing serious at 1280 and 375 px.
func TestBrowserFormsPhoneAndSignIn(t *testing.T) {
	t.Parallel()
	ctx := startBrowser(t)
	var status atomic.Int32
	status.Store(http.StatusUnauthorized)
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		if s := int(status.Load()); s != http.StatusOK {
			w.WriteHeader(s)
			return
		}
		_, _ = w.Write([]byte(`{"id":1}`))
	})
	b := setupServing(t)
	id := b.f.Human("Mary Jackson")
	me := hostid.Human(id)
	hum, err := hoststore.HumanByID(b.ctx, b.pool, id)
	require.NoError(t, err)
	queue := b.f.Queue(me, "builds")
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build failed on main"})
	require.NoError(t, err)
	item := b.srv.URL + "/board/todos/" + itoa(todo.ID)

	step(t, ctx, chromedp.EmulateViewport(1280, 900))
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/login/"+b.loginLink(t, id)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))

	// Item 1: the guided sink form.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/sinks"))
	require.Equal(t, "none", displayOf(t, ctx, "#conn-apprise-urls"), "no Apprise URLs on a Gotify form")
	require.Equal(t, "none", displayOf(t, ctx, "#sink-config-key"), "no Apprise config key on a Gotify form")
	require.NotEqual(t, "none", displayOf(t, ctx, "#conn-secret"))
	require.Contains(t, text(t, ctx, "#conn-secret-help"), "In Gotify: Apps → Create application → copy its token")
	require.NotContains(t, text(t, ctx, "main"), "first.", "no 'create a connection first' above 'a new one right here'")
	require.False(t, exists(t, ctx, "#sink-connection"), "nothing to pick yet: one choice")
	require.Equal(t, "Options: priority and budget", text(t, ctx, "#sink-options > summary"))
	require.False(t, shown(t, ctx, `input[name="priority_low"]`), "priority is folded under Options")
	require.False(t, shown(t, ctx, `input[name="budget_per_hour"]`), "budget is folded under Options")
	checkPage(t, ctx, "/sinks, new-sink form")

	// Apprise: its fields, with their help; Gotify's token goes.
	step(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const k = document.getElementById("sink-kind"); k.value = "apprise"; k.dispatchEvent(new Event("change")); })()`))
	require.Equal(t, "none", displayOf(t, ctx, "#conn-secret"))
	require.NotEqual(t, "none", displayOf(t, ctx, "#conn-apprise-urls"))
	require.NotEqual(t, "none", displayOf(t, ctx, "#sink-config-key"))
	require.Contains(t, text(t, ctx, "#conn-apprise-help"), "Apprise URLs")
	require.Contains(t, text(t, ctx, "#config-key-help"), "configuration saved on the Apprise API server")
	step(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const k = document.getElementById("sink-kind"); k.value = "gotify"; k.dispatchEvent(new Event("change")); })()`))
	require.Equal(t, "none", displayOf(t, ctx, "#conn-apprise-urls"))

	// A failed test marks the field it names, with Gotify's advice.
	step(t, ctx,
		chromedp.SendKeys(chromedp.ID("sink-name"), "phone"),
		chromedp.SendKeys(chromedp.ID("conn-url"), gotify.URL),
		chromedp.SendKeys(chromedp.ID("conn-secret"), "gtfya.Wrong"),
		chromedp.Click(chromedp.ID("test-sink-button")),
	)
	result := waitText(t, ctx, "#test-result", "not delivered")
	require.Contains(t, result, "See Token below.")
	require.NotContains(t, result, "config key")
	require.Equal(t, "true", eval[string](t, ctx, `document.getElementById("conn-secret").getAttribute("aria-invalid")`))
	require.Contains(t, text(t, ctx, "#error-secret"), "Apps → your application")
	require.True(t, eval[bool](t, ctx, `document.getElementById("conn-secret").getAttribute("aria-describedby").split(" ").includes("error-secret")`))
	require.True(t, eval[bool](t, ctx, `!!(document.getElementById("conn-secret-help").compareDocumentPosition(document.getElementById("error-secret")) & Node.DOCUMENT_POSITION_FOLLOWING)`),
		"the message is under the Token field")
	checkPage(t, ctx, "/sinks, a failed test")
	// Fixed: the mark goes, the test passes, the sink is made.
	status.Store(http.StatusOK)
	step(t, ctx, chromedp.Click(chromedp.ID("test-sink-button")))
	waitText(t, ctx, "#test-result", "Test message delivered")
	require.False(t, exists(t, ctx, "#error-secret"))
	require.False(t, exists(t, ctx, `#conn-secret[aria-invalid]`))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-sink-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Sink created.")
	sinkURL := strings.TrimSuffix(location(t, ctx), "?notice=sink_created")

	// A connection is edited: renamed, its token kept.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/connections"))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.CSS(`a[id^="edit-connection-"]`))))
	checkPage(t, ctx, "connection edit page")
	require.Empty(t, eval[string](t, ctx, `document.getElementById("conn-secret").value`), "a secret is never filled in")
	step(t, ctx, chromedp.SetValue(chromedp.ID("conn-name"), "home gotify"))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("save-connection-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Connection saved.")
	require.Contains(t, text(t, ctx, "#connections"), "home gotify")
	require.Contains(t, text(t, ctx, "#connections"), "set (write-only)", "the token is kept")

	// /favicon.ico is an icon.
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+"/favicon.ico"))

	// Item 8: at a phone's width, no table is cut off and the menu is one
	// short bar.
	step(t, ctx, chromedp.EmulateViewport(375, 740))
	for _, path := range []string{"/sinks", strings.TrimPrefix(sinkURL, b.srv.URL), "/connections", "/queues",
		"/queues/" + itoa(queue), "/board/todos/" + itoa(todo.ID), "/endpoints", "/ops"} {
		require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+path), path)
		where := path + " at 375 px"
		axeCheck(t, ctx, where)
		requireTablesFit(t, ctx, where)
		h := eval[float64](t, ctx, `document.querySelector("header.top").getBoundingClientRect().height`)
		require.Less(t, h, 80.0, "%s: the menu takes %v px", where, h)
	}
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/sinks"))
	pill := eval[[]float64](t, ctx, `(() => { const r = document.querySelector("#sinks .pill").getBoundingClientRect(); return [r.left, r.right, document.documentElement.clientWidth]; })()`)
	require.GreaterOrEqual(t, pill[0], 0.0)
	require.LessOrEqual(t, pill[1], pill[2], "the state pill reads whole")
	require.Equal(t, "enabled", text(t, ctx, "#sinks .pill"))
	// The menu opens to every page.
	require.False(t, shown(t, ctx, `header nav.wide`))
	step(t, ctx, chromedp.Click(chromedp.CSS("#menu > summary")))
	require.True(t, shown(t, ctx, `#menu nav a[href="/ops"]`))
	axeCheck(t, ctx, "/sinks at 375 px, menu open")
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/ops"))
	require.True(t, eval[bool](t, ctx, `[...document.querySelectorAll("#sink-states td")].some(td => td.dataset.label === "When" && td.getBoundingClientRect().width > 0)`),
		"Ops keeps When")

	// Item 2: signed out, a phone opens the board link, asks for a sign-in
	// link, gets it through its own sink, and lands on the item.
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.CSS("form.who button"))))
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, item))
	require.Equal(t, b.srv.URL+"/login?next="+url.QueryEscape("/board/todos/"+itoa(todo.ID)), location(t, ctx))
	axeCheck(t, ctx, "/login at 375 px")
	before := len(gotify.Requests())
	step(t, ctx, chromedp.SendKeys(chromedp.ID("sign-in-email"), hum.Email))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("send-sign-in-link"))))
	require.Contains(t, text(t, ctx, "#sign-in-sent"), "sign-in link is on its way")
	require.Regexp(t, `until \d\d:\d\d UTC`, text(t, ctx, "#sign-in-sent"), "valid until, with its zone")
	axeCheck(t, ctx, "/login/sent at 375 px")
	web.WaitSignInSends()
	msgs := gotifyMessages(t, gotify)
	require.Len(t, msgs, before+1)
	click, _ := msgs[before].Extras["client::notification"]["click"].(map[string]any)
	link := asString(click["url"])
	require.True(t, strings.HasPrefix(link, b.srv.URL+"/login/sbl_"), link)
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, link))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))
	require.Equal(t, item, location(t, ctx), "back on the item asked for")
	require.Contains(t, text(t, ctx, "main h2"), "Nightly build failed on main")
}
