package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/sinktest"
)

// deliveryWait bounds the wait for a notification to reach the Gotify
// stand-in (wall time; the claimer polls every 20 ms here).
const deliveryWait = 20 * time.Second

// TestBrowserFirstHour walks exactly what a new user does in their first
// hour, in headless Chromium: open the login link, create a Gotify
// connection and a sink (on a local Gotify stand-in), subscribe it to a
// queue picked by name, enqueue a todo, make it dead-letter, see the
// notification arrive at the stand-in, and follow its board link to the
// board page. With UPDATE_SCREENSHOTS=1 it rewrites docs/screenshots.
func TestBrowserFirstHour(t *testing.T) {
	t.Parallel()
	ctx := startBrowser(t)
	arrived := make(chan struct{}, 10)
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"id":1}`))
		arrived <- struct{}{}
	})
	b := setupServing(t, func(c *engine.Config) { c.PollInterval = 20 * time.Millisecond })
	runEngine(t, b)
	const token = "gtfya.FirstHourToken7"
	id := b.f.Human("Grace Hopper")
	shots := screenshotter(t, ctx)
	check := func(where string) { t.Helper(); checkPage(t, ctx, where) }

	// Open the login link and sign in.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/login/"+b.loginLink(t, id)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))
	require.True(t, strings.HasPrefix(text(t, ctx, "main h2"), "Sinks of Grace Hopper ("))
	check("/sinks, signed in")

	// The guided start (issue 19 item 8): the sink form creates its
	// connection inline and sends a test before anything is saved; only
	// the chosen kind's fields show.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/sinks"))
	check("/sinks")
	require.False(t, visible(t, ctx, `#create-sink fieldset[data-kind="apprise"]`), "only the chosen kind's options show")
	require.True(t, visible(t, ctx, `#create-sink fieldset[data-kind="gotify"]`))
	require.True(t, visible(t, ctx, `#new-connection`), "with no connection yet, a new one is offered")
	step(t, ctx,
		chromedp.SendKeys(chromedp.ID("sink-name"), "phone"),
		chromedp.SendKeys(chromedp.ID("conn-name"), "home gotify"),
		chromedp.SendKeys(chromedp.ID("conn-url"), gotify.URL),
		chromedp.SendKeys(chromedp.ID("conn-secret"), token),
		chromedp.Click(chromedp.ID("test-sink-button")),
	)
	require.Contains(t, waitText(t, ctx, "#test-result", "delivered"), "Test message delivered")
	select {
	case <-arrived:
	case <-time.After(deliveryWait):
		t.Fatal("the test message did not reach the Gotify stand-in")
	}
	require.Zero(t, b.count(t, "connections"), "a test saves nothing")
	require.Zero(t, b.count(t, "sinks"))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-sink-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Sink created.")
	sinkURL := strings.TrimSuffix(location(t, ctx), "?notice=sink_created")
	reload(t, ctx)
	require.Equal(t, 1, b.count(t, "sinks"), "a reload creates nothing more")
	require.Equal(t, 1, b.count(t, "connections"))

	// A queue, made in the browser.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/queues"), chromedp.SendKeys(chromedp.ID("queue-name"), "builds"))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-queue-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Queue created.")
	queueURL := strings.TrimSuffix(location(t, ctx), "?notice=queue_created")

	// Subscribe the sink to dead letters of that queue, picked by name;
	// the event types read in words, rule.notify is not offered.
	step(t, ctx, chromedp.Navigate(sinkURL))
	check("sink page")
	require.Contains(t, text(t, ctx, "#add-subscription"), "A todo dead-lettered")
	require.False(t, exists(t, ctx, `input[name="event_types"][value="rule.notify"]`))
	step(t, ctx, chromedp.Click(chromedp.CSS(`input[name="event_types"][value="todo.dead_lettered"]`)))
	tickByLabel(t, ctx, "queues", "builds")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("add-subscription-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Subscription added.")
	require.Contains(t, text(t, ctx, "#subscriptions"), "builds", "the filter shows the queue's name")
	shots("sink.png")

	// Enqueue a todo, then make it dead-letter.
	step(t, ctx, chromedp.Navigate(queueURL), chromedp.SendKeys(chromedp.ID("todo-title"), "Nightly build failed on main"))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("enqueue-button"))))
	require.Contains(t, text(t, ctx, "#notice"), "Todo enqueued.")
	require.Contains(t, text(t, ctx, "#todos"), "pending")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.CSS(`#todos button.danger`))))
	require.Contains(t, text(t, ctx, "#notice"), "Todo dead-lettered.")
	require.Contains(t, text(t, ctx, "#todos"), "dead")
	shots("queue.png")

	// The notification arrives at the stand-in, with the board link.
	select {
	case <-arrived:
	case <-time.After(deliveryWait):
		t.Fatal("no notification reached the Gotify stand-in")
	}
	// The stand-in answered; the outcome is written a moment later, by the
	// recorder. The board shows it once it is.
	require.Eventually(t, func() bool {
		return b.f.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'todo.dead_lettered' AND state = 'delivered'`) == 1
	}, deliveryWait, 10*time.Millisecond, "the dead letter's outcome was not recorded")
	reqs := gotify.Requests()
	require.Len(t, reqs, 2, "the test message, then the dead letter")
	reqs = reqs[1:]
	require.Equal(t, token, reqs[0].Header.Get("X-Gotify-Key"))
	var msg struct {
		Title, Message string
		Extras         map[string]map[string]any
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &msg))
	// Written for a person (issue 19 item 10): no log-style event tag, no
	// "after 0 attempts"; Markdown for Gotify, and a tap opens the board.
	require.Equal(t, "Dead letter in builds: Nightly build failed on main", msg.Title)
	require.Contains(t, msg.Message, "A todo in queue builds dead-lettered before any attempt: it was interrupted.")
	require.NotContains(t, msg.Title+msg.Message, "[todo.dead_lettered]")
	require.Equal(t, map[string]any{"contentType": "text/markdown"}, msg.Extras["client::display"])
	click, _ := msg.Extras["client::notification"]["click"].(map[string]any)
	link := []string{"", fmt.Sprint(click["url"])}
	require.True(t, strings.HasPrefix(link[1], b.srv.URL+"/board/todos/"), "the click URL is the board link: %v", msg.Extras)
	require.Contains(t, msg.Message, "[Open on the board]("+link[1]+")")

	// Follow it: the todo's board page, with its dead letter and the
	// delivered notification.
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, link[1]))
	require.Contains(t, text(t, ctx, "main h2"), "Nightly build failed on main")
	require.Contains(t, text(t, ctx, "main dl"), "interrupted")
	notes := text(t, ctx, "#notifications")
	require.Contains(t, notes, "todo.dead_lettered")
	require.Contains(t, notes, "A todo dead-lettered", "the kind in words")
	// The delivered notification keeps its title (issue 25 item 5: read
	// from the todo; the finished row itself keeps none).
	require.Equal(t, "Nightly build failed on main", text(t, ctx, "#notifications .event-title"))
	require.Contains(t, notes, "phone")
	require.Contains(t, notes, "delivered")
	shots("board.png")

	// The notifications board, for the README.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/board/notifications"))
	require.Contains(t, text(t, ctx, "#notifications"), "delivered")
	require.Equal(t, "Nightly build failed on main", text(t, ctx, "#notifications .event-title"), "the title, not \"todo 2\"")
	check("/board/notifications")
	shots("notifications.png")

	// A webhook (item 7): its secret shown once, a rule whose queue and
	// sink are picked by name, Rotate secret asked first (item 11).
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/webhooks"), chromedp.SendKeys(chromedp.ID("webhook-name"), "forge"),
		chromedp.SendKeys(chromedp.ID("webhook-senders"), "octocat"))
	check("/webhooks")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-webhook-button"))))
	secret := text(t, ctx, "#webhook-secret")
	require.True(t, strings.HasPrefix(secret, "sbw_"), secret)
	check("webhook secret page")
	reload(t, ctx)
	require.Contains(t, text(t, ctx, "#notice"), "shown once")
	require.False(t, exists(t, ctx, "#webhook-secret"), "a reload does not show the secret again")
	hookURL := strings.TrimSuffix(location(t, ctx), "?notice=secret_shown")
	check("webhook page")
	step(t, ctx, chromedp.SendKeys(chromedp.ID("rule-name"), "red builds"), chromedp.SetValue(chromedp.ID("rule-expr"), "true"))
	selectByText(t, ctx, "rule-queue", "builds")
	selectByText(t, ctx, "rule-notify", "phone (gotify)")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("add-rule-button"))))
	require.Contains(t, text(t, ctx, "#rules"), "route to queue builds, notify sink phone")
	// A rule that does nothing: the refusal is under the field, in words.
	step(t, ctx, chromedp.SendKeys(chromedp.ID("rule-name"), "idle"), chromedp.SetValue(chromedp.ID("rule-expr"), "true"))
	require.EqualValues(t, http.StatusBadRequest, submit(t, ctx, chromedp.Click(chromedp.ID("add-rule-button"))))
	require.Contains(t, text(t, ctx, "#add-rule #error-action"), "pick a queue to route to")
	check("webhook page with a refusal")
	step(t, ctx, chromedp.Navigate(hookURL))
	sealed := sealedSecretSum(t, b, hookURL)
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("rotate-secret"))))
	require.Contains(t, text(t, ctx, "main h1"), "Rotate the secret of forge?")
	check("rotate confirmation")
	reload(t, ctx)
	require.Equal(t, sealed, sealedSecretSum(t, b, hookURL), "asking (and asking again) changes nothing")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("confirm-button"))))
	rotated := text(t, ctx, "#webhook-secret")
	require.NotEqual(t, secret, rotated)
	rotatedSum := sealedSecretSum(t, b, hookURL)
	require.NotEqual(t, sealed, rotatedSum, "rotated")
	reload(t, ctx)
	require.False(t, exists(t, ctx, "#webhook-secret"), "a reload shows the secret no more")
	require.Equal(t, rotatedSum, sealedSecretSum(t, b, hookURL), "a reload rotates nothing")

	// A digest (item 9): owner by name, next send in its zone, Last sent
	// after Send now, the preview a report; a reload sends nothing more.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/digests"), chromedp.SendKeys(chromedp.ID("digest-name"), "morning"),
		chromedp.SendKeys(chromedp.ID("digest-schedule"), "TZ=Europe/Berlin Mon-Fri 09:00"))
	check("/digests")
	tickByLabel(t, ctx, "sink_ids", "phone (gotify)")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-digest-button"))))
	check("digest page")
	require.Contains(t, text(t, ctx, "#digest-owner"), "Grace Hopper")
	require.Contains(t, text(t, ctx, "#next-send"), "(Europe/Berlin)")
	require.Equal(t, "never", text(t, ctx, "#last-sent"))
	require.Contains(t, text(t, ctx, "#digest-report"), "Queue builds")
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("send-digest-button"))))
	require.Contains(t, text(t, ctx, "#last-sent"), "sent by hand")
	reload(t, ctx)
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.digest_runs`), "a reload sends nothing more")
}

// check asserts what every page of the first hour must have: a title, a
// heading, a skip link to the main content, and no serious or critical
// axe-core violation at the browser's width.
func checkPage(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	title, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.title`))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(title, " · Switchboard Notify") && len(title) > len(" · Switchboard Notify"), "%s: title %q", where, title)
	require.NotEmpty(t, text(t, ctx, "main h1"), where)
	require.True(t, exists(t, ctx, `a.skip[href="#main"]`), "%s: a skip link", where)
	axeCheck(t, ctx, where+" at 1280 px")
}

// exists reports whether the page has an element matching sel.
func exists(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(sel)+`) !== null`))
	require.NoError(t, err)
	return ok
}

// visible reports whether the element matching sel is shown.
func visible(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.getClientRects().length > 0; })()`))
	require.NoError(t, err)
	return ok
}

// waitText waits until the element's text contains want (a script
// updates it), and returns the text.
func waitText(t *testing.T, ctx context.Context, sel, want string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	_, err := chromedp.Run(sctx, chromedp.Poll[bool](`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.textContent.includes(`+jsString(want)+`); })()`))
	require.NoError(t, err, "%s never said %q", sel, want)
	return text(t, ctx, sel)
}

// reload reloads the page, as a person pressing F5 does.
func reload(t *testing.T, ctx context.Context) {
	t.Helper()
	step(t, ctx, chromedp.Reload())
}

// sealedSecretSum is a fingerprint of the webhook's sealed secret (it
// changes when the secret is rotated), read from the database.
func sealedSecretSum(t *testing.T, b *bundle, hookURL string) string {
	t.Helper()
	id, err := strconv.ParseInt(hookURL[strings.LastIndex(hookURL, "/")+1:], 10, 64)
	require.NoError(t, err)
	var sum string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT encode(sha256(secret), 'hex') FROM webhooks WHERE id = $1`, id).Scan(&sum))
	return sum
}

// TestBrowserPhoneWidth loads every page at a desktop's width (1280 px)
// and a phone's (375 px), with realistic long content (long names, a
// webhook with rules, deliveries and a quarantine, a digest with runs):
// at the phone's width the page never scrolls sideways (wide tables
// scroll inside their card), and at both axe-core finds no violation of
// impact serious or critical (issue 19 item 11).
func TestBrowserPhoneWidth(t *testing.T) {
	t.Parallel()
	ctx := startBrowser(t)
	b := newBundle(t)
	hooks := host.NewWebhooks(host.WebhooksConfig{Pool: b.pool, Emitter: b.eng, SecretKey: b.eng.Config().SecretKey})
	b.deps.Webhooks = hooks
	b.serve(t)
	id := b.f.Human("Katherine Johnson with a rather long name for a phone")
	me := hostid.Human(id)
	p := engine.HumanPrincipal(hostid.String(id))
	gotify := sinktest.NewServer(t, nil)
	conn := b.gotifyConnection(t, id, me, gotify.URL+"/a/rather/long/path/that/would/not/fit/on/a/phone/screen", "gtfya.phone")
	sink := b.gotifySink(t, id, me, conn.ID, "a-sink-with-a-long-name-that-goes-on")
	_, err := b.eng.SendTestMessage(b.ctx, p, sink.ID)
	require.NoError(t, err)
	queue := b.f.Queue(me, "a-queue-with-a-name-long-enough-to-need-wrapping")
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build of the release-candidate-branch-with-a-long-name failed"})
	require.NoError(t, err)
	_, err = b.deps.Todos.Interrupt(b.ctx, id, todo.ID)
	require.NoError(t, err)

	hook, secret, err := hooks.Create(b.ctx, p, host.WebhookInput{Owner: me, Name: "github-organisation-wide-webhook-for-forge",
		TrustedSenders: []string{"octocat", "dependabot[bot]", "a-very-long-github-app-name-for-releases[bot]"}})
	require.NoError(t, err)
	_, err = hooks.AddRule(b.ctx, p, hook.ID, host.RuleInput{Name: "red builds from the release pipeline go to the queue",
		Expr:   `.workflow_run.conclusion == "failure" and (.workflow_run.head_branch | startswith("release/"))`,
		Action: host.RuleAction{Queue: queue, Notify: sink.Name, NotifySeverity: notifytype.SeverityHigh}})
	require.NoError(t, err)
	for _, sender := range []string{"octocat", "mallory-with-a-long-login-name"} {
		body := `{"sender":{"login":"` + sender + `"},"workflow_run":{"conclusion":"failure","head_branch":"release/2026.12-with-a-long-branch-name"},"issue":{"title":"The nightly build of the release candidate failed on arm64 and x86_64"}}`
		_, err := hooks.Receive(b.ctx, hook.ID, []byte(body), host.Sign(secret, host.NewMessageID(), time.Now(), []byte(body)))
		require.NoError(t, err)
	}
	deliveries, err := hooks.Deliveries(b.ctx, p, hook.ID, "", 1)
	require.NoError(t, err)
	require.NotEmpty(t, deliveries)

	dg, err := b.deps.Digests.Create(b.ctx, p, digests.Input{Owner: me, Name: "morning-digest-for-the-whole-release-team",
		Schedule: "TZ=America/Los_Angeles Mon-Fri 09:00,17:00", SinkIDs: []int64{sink.ID}})
	require.NoError(t, err)
	_, err = b.deps.Digests.SendNow(b.ctx, p, dg.ID)
	require.NoError(t, err)

	pages := []string{"/sinks", "/sinks/" + itoa(sink.ID), "/connections", "/queues", "/queues/" + itoa(queue),
		"/endpoints", "/ops", "/board/notifications", "/board/todos/" + itoa(todo.ID), "/board/queues/a-queue-with-a-name-long-enough-to-need-wrapping",
		"/webhooks", "/webhooks/" + itoa(hook.ID), "/webhooks/" + itoa(hook.ID) + "/rotate", "/webhooks/" + itoa(hook.ID) + "/delete",
		fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, deliveries[0].ID),
		"/digests", "/board/digests/" + itoa(dg.ID), "/board/digests/" + itoa(dg.ID) + "/delete", "/no/such/page"}

	step(t, ctx, chromedp.Navigate(b.srv.URL+"/login/"+b.loginLink(t, id)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))
	for _, width := range []int64{1280, 375} {
		step(t, ctx, chromedp.EmulateViewport(width, 740))
		for _, path := range pages {
			status := navigate(t, ctx, b.srv.URL+path)
			if path != "/no/such/page" {
				require.EqualValues(t, http.StatusOK, status, path)
			}
			axeCheck(t, ctx, fmt.Sprintf("%s at %d px", path, width))
			if width > 640 {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
			overflow, err := chromedp.Run(sctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
			cancel()
			require.NoError(t, err)
			if overflow > 0 {
				sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
				wide, _ := chromedp.Run(sctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth).map(e => e.tagName + "." + e.className + "#" + e.id + " " + Math.round(e.getBoundingClientRect().right))`))
				cancel()
				t.Logf("wider than the screen on %s: %v", path, wide)
			}
			require.LessOrEqual(t, overflow, 0, "%s scrolls sideways by %d px at 375 px", path, overflow)
			requireTablesFit(t, ctx, path+" at 375 px")
			// No table cell breaks a word mid-word: a cell's words fit it,
			// and a table too wide scrolls inside its wrapper instead.
			sctx, cancel = context.WithTimeout(ctx, browserStepTimeout)
			broken, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td, th")].filter(c => {
				const s = getComputedStyle(c);
				return s.overflowWrap === "anywhere" || s.wordBreak === "break-all";
			}).map(c => c.textContent.trim().slice(0, 40))`))
			cancel()
			require.NoError(t, err)
			require.Empty(t, broken, "%s: table cells that may break words mid-word", path)
		}
	}
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/sinks/"+itoa(sink.ID)))
	shotsAt(t, ctx, "phone.png")
}

// setupServing is setup with the engine's board links pointing at the
// test server.
func setupServing(t *testing.T, configure ...func(*engine.Config)) *bundle {
	t.Helper()
	srv := newUnstartedServer()
	base := "http://" + srv.Listener.Addr().String()
	b := newBundle(t, append(configure, func(c *engine.Config) { c.BaseURL = base }, withDigestSources)...)
	b.deps.Webhooks = host.NewWebhooks(host.WebhooksConfig{Pool: b.pool, Emitter: b.eng, SecretKey: b.eng.Config().SecretKey})
	b.srv = srv
	b.deps.BaseURL = base
	b.srv.Config.Handler = webHandler(b)
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b
}

// runEngine serves the engine (claimer, actors) until the test ends.
func runEngine(t *testing.T, b *bundle) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- b.eng.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// navigate loads url and returns its HTTP status.
func navigate(t *testing.T, ctx context.Context, url string) int64 {
	t.Helper()
	return submit(t, ctx, chromedp.Navigate(url))
}

// selectByText picks the option of the select whose text is label, as a
// person does.
func selectByText(t *testing.T, ctx context.Context, selectID, label string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`(() => {
		const s = document.getElementById(`+jsString(selectID)+`);
		const o = [...s.options].find(o => o.textContent.trim() === `+jsString(label)+`);
		if (!o) return false;
		s.value = o.value;
		return true;
	})()`))
	require.NoError(t, err)
	require.True(t, ok, "no option %q in #%s", label, selectID)
}

// tickByLabel ticks the checkbox named name whose label reads label.
func tickByLabel(t *testing.T, ctx context.Context, name, label string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`(() => {
		const box = [...document.querySelectorAll('input[type=checkbox][name=`+name+`]')]
			.find(b => b.parentElement.textContent.trim() === `+jsString(label)+`);
		if (!box) return false;
		box.click();
		return box.checked;
	})()`))
	require.NoError(t, err)
	require.True(t, ok, "no %s box labelled %q", name, label)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// screenshotter returns a function that saves the page as
// docs/screenshots/<name> when UPDATE_SCREENSHOTS=1.
func screenshotter(t *testing.T, ctx context.Context) func(name string) {
	return func(name string) {
		t.Helper()
		shotsAt(t, ctx, name)
	}
}

func shotsAt(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100 is PNG; less is JPEG
	require.NoError(t, err)
	out := filepath.Join("..", "..", "docs", "screenshots", name)
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	require.NoError(t, os.WriteFile(out, png, 0o644))
}
