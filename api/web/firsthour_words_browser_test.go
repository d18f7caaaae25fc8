package web_test

import (
	"context"
	"fmt"
	"net/http"
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
	"github.com/switchboard/notify/store/storetest"
)

// TestBrowserFirstHourWords walks what issue 25 items 3 to 7 changed, in
// headless Chromium, after a first hour's events have reached a phone: a
// dead letter, a webhook whose rule only notifies, a digest sent by hand.
// The digests list and the digest page say the same (owner, next and last
// send in the schedule's zone, sinks by name); the notifications page has
// one entry per event, titled, with its sinks inside; nothing says
// "unrouted" beside a notify (the webhook page, the delivery's pill);
// /ops names sinks; no jargon on the pages walked; and axe-core finds no
// serious or critical violation at 1280 and 375 px.
func TestBrowserFirstHourWords(t *testing.T) {
	t.Parallel()
	ctx := startBrowser(t)
	arrived := make(chan struct{}, 10)
	gotify := sinktest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"id":1}`))
		arrived <- struct{}{}
	})
	b := setupServing(t, func(c *engine.Config) { c.PollInterval = 20 * time.Millisecond })
	runEngine(t, b)
	id := b.f.Human("Grace Hopper")
	me := hostid.Human(id)
	p := engine.HumanPrincipal(hostid.String(id))
	conn := b.gotifyConnection(t, id, me, gotify.URL, "gtfya.words")
	sink := b.gotifySink(t, id, me, conn.ID, "phone")
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink.ID, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	queue := b.f.Queue(me, "builds")

	// A dead letter.
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build failed on main"})
	require.NoError(t, err)
	_, err = b.deps.Todos.Interrupt(b.ctx, id, todo.ID)
	require.NoError(t, err)
	// A webhook whose rule notifies the phone and routes nowhere.
	hooks := b.deps.Webhooks
	hook, secret, err := hooks.Create(b.ctx, p, host.WebhookInput{Owner: me, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	_, err = hooks.SetRules(b.ctx, p, hook.ID, []host.RuleInput{{Name: "new issues", Expr: `.issue != null`, Action: host.RuleAction{Notify: "phone"}}})
	require.NoError(t, err)
	body := []byte(`{"sender":{"login":"octocat"},"repository":{"full_name":"acme/forge"},"issue":{"number":12,"title":"The build is red"}}`)
	got, err := hooks.Receive(b.ctx, hook.ID, body, host.Sign(secret, host.NewMessageID(), time.Now(), body))
	require.NoError(t, err)
	require.Equal(t, "notified phone; no todo created", got.Summary)
	// A digest, sent by hand.
	dg, err := b.deps.Digests.Create(b.ctx, p, digests.Input{Owner: me, Name: "morning",
		Schedule: "TZ=Europe/Berlin Mon-Fri 09:00", SinkIDs: []int64{sink.ID}})
	require.NoError(t, err)
	_, err = b.deps.Digests.SendNow(b.ctx, p, dg.ID)
	require.NoError(t, err)
	for range 3 {
		select {
		case <-arrived:
		case <-time.After(deliveryWait):
			t.Fatal("the dead letter, the rule's message and the digest did not all reach the Gotify stand-in")
		}
	}

	step(t, ctx, chromedp.Navigate(b.srv.URL+"/login/"+b.loginLink(t, id)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))

	// Item 3: the digests list and the digest page agree.
	digestURL := b.srv.URL + "/board/digests/" + itoa(dg.ID)
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, digestURL))
	owner, next, last := text(t, ctx, "#digest-owner"), text(t, ctx, "#next-send"), text(t, ctx, "#last-sent")
	require.Contains(t, owner, "Grace Hopper")
	require.Contains(t, next, "(Europe/Berlin)")
	require.Contains(t, last, "(Europe/Berlin)", "Last sent from the runs, in the schedule's zone")
	require.Equal(t, "phone", text(t, ctx, "#digest-targets"))
	runs := text(t, ctx, "main section:nth-of-type(3) table")
	require.Contains(t, runs, "(Europe/Berlin)", "Latest runs in the schedule's zone")
	require.NotContains(t, runs, " UTC")
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+"/digests"))
	require.Contains(t, text(t, ctx, "main h2"), "Digests of Grace Hopper")
	row := `tr:has(a[href="/board/digests/` + itoa(dg.ID) + `"])`
	require.Equal(t, next, text(t, ctx, row+" td.next-send"), "the list's next send is the page's")
	lastWhen, _, _ := strings.Cut(last, " (sent")
	require.Equal(t, strings.TrimSpace(lastWhen), text(t, ctx, row+" td.last-sent"), "the list's last send is the page's")
	require.Equal(t, "phone", text(t, ctx, row+" td.targets"))

	// Item 5: one entry per event, titled, its sinks inside.
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+"/board/notifications"))
	titles := texts(t, ctx, "#notifications li.event .event-title")
	require.Len(t, titles, 3, "three events, three entries: %v", titles)
	require.Contains(t, titles, "Nightly build failed on main", "the dead letter keeps its title once delivered")
	require.Contains(t, titles, "The build is red")
	require.Contains(t, titles, "morning")
	require.Equal(t, 3, len(texts(t, ctx, "#notifications li.event .event-sinks > li")), "each event's one sink inside it")

	// Item 6: no "unrouted" beside a notify; the subject in words.
	hookURL := b.srv.URL + "/webhooks/" + itoa(hook.ID)
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, hookURL))
	require.NotContains(t, text(t, ctx, "main"), "unrouted")
	require.Contains(t, text(t, ctx, "main"), "notified phone; no todo created")
	require.NotContains(t, text(t, ctx, "#webhook-subject"), "join(", "the subject in words, not a jq expression")
	require.Equal(t, "Settings", text(t, ctx, "#settings-heading"))
	deliveryURL := fmt.Sprintf("%s/board/webhooks/%d/deliveries/%d", b.srv.URL, hook.ID, got.DeliveryID)
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, deliveryURL))
	require.Equal(t, "notified phone; no todo created", text(t, ctx, "#delivery-outcome"))

	// Item 7: words a person knows on the pages walked; /ops by name.
	pages := []string{"/digests", "/board/digests/" + itoa(dg.ID), "/board/notifications", "/webhooks/" + itoa(hook.ID),
		fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, got.DeliveryID), "/ops", "/endpoints", "/queues"}
	for _, path := range pages {
		require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+path))
		words := text(t, ctx, "main")
		for _, jargon := range []string{"Vend", "doorbell", "actor", "Tokens", "reference host", "unrouted", " held"} {
			require.NotContains(t, words, jargon, "%s says %q", path, jargon)
		}
	}
	require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+"/ops"))
	if exists(t, ctx, "#actors") {
		require.Contains(t, text(t, ctx, "#actors"), "phone", "/ops names the sink")
	}

	// axe-core: no serious or critical violation at a desktop's and a
	// phone's width.
	for _, width := range []int64{1280, 375} {
		step(t, ctx, chromedp.EmulateViewport(width, 800))
		for _, path := range pages {
			require.EqualValues(t, http.StatusOK, navigate(t, ctx, b.srv.URL+path))
			axeCheck(t, ctx, fmt.Sprintf("%s at %d px", path, width))
		}
	}
}

// texts reads the text of every element matching sel.
func texts(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(`+jsString(sel)+`)].map(e => e.textContent.trim())`))
	require.NoError(t, err)
	return v
}
