package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
)

// withDigestSources gives the bundle's digests the reference host's
// sources (newBundle reads digestSourcesFor once the config is built).
func withDigestSources(c *engine.Config) { digestSourcesFor.Store(c.Pool, true) }

// digestSourcesFor holds the pools of the bundles whose digests have
// sources.
var digestSourcesFor sync.Map

func TestDigestPagesCreatePreviewSendNow(t *testing.T) {
	t.Parallel()
	b := setup(t, withDigestSources)
	id, c := b.human(t)
	scope := hostid.Human(id)
	conn := b.gotifyConnection(t, id, scope, "https://push.example.net", "gtfya.web")
	sink := b.gotifySink(t, id, scope, conn.ID, "phone")
	queue := b.f.Queue(scope, "forge")

	page := c.get("/digests")
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, "No digests yet.")
	require.Contains(t, page.body, `name="queue_ids" value="`+strconv.FormatInt(queue, 10)+`"`)

	// Scenario: Invalid schedule
	bad := c.post("/digests", url.Values{"name": {"morning"}, "schedule": {"Mon-Fri 25:00"}, "sink_ids": {strconv.FormatInt(sink.ID, 10)}, "skip_when_quiet": {"1"}})
	require.Equal(t, http.StatusBadRequest, bad.status)
	code, field, _ := bad.refusal(t)
	require.Equal(t, "invalid_argument", code)
	require.Equal(t, "schedule", field)
	require.Contains(t, bad.body, `value="Mon-Fri 25:00"`, "the form keeps what was typed")
	require.Zero(t, b.count(t, "digests"))

	res := c.post("/digests", url.Values{"name": {"morning"}, "schedule": {"TZ=Europe/Berlin Mon-Fri 09:00"}, "sink_ids": {strconv.FormatInt(sink.ID, 10)}, "skip_when_quiet": {"1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	loc := res.header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/board/digests/"), loc)

	board := c.get(loc)
	require.Equal(t, http.StatusOK, board.status, board.body)
	require.Contains(t, board.body, `id="digest-preview"`)
	require.Contains(t, board.body, "Unavailable (not measured on this instance): unanswered agent wake-ups")
	require.Contains(t, board.body, "Unavailable: not measured on this instance.")
	require.Contains(t, board.body, "Not sent yet.")

	// Post-redirect-get: "Send now" answers with a redirect, and the page it
	// leads to says what was sent; loading that page again (a reload)
	// sends nothing more.
	sent := c.post(loc+"/send", nil)
	require.Equal(t, http.StatusSeeOther, sent.status, sent.body)
	after := sent.header.Get("Location")
	require.Equal(t, loc+"?notice=digest_sent", after)
	for range 2 {
		page := c.get(after)
		require.Equal(t, http.StatusOK, page.status, page.body)
		require.Contains(t, page.body, "Sent now to 1 sink; the scheduled send is unchanged.")
	}
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`))
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.digests WHERE last_sent_at IS NULL AND last_slot_at IS NULL`),
		"sending now spends no scheduled time")

	saved := c.post(loc, url.Values{"name": {"mornings"}, "schedule": {"TZ=Europe/Berlin Mon-Fri 09:30"},
		"sink_ids": {strconv.FormatInt(sink.ID, 10)}, "skip_when_quiet": {"1"}})
	require.Equal(t, http.StatusSeeOther, saved.status, saved.body)
	require.Equal(t, loc+"?notice=digest_saved", saved.header.Get("Location"))
	page = c.get(saved.header.Get("Location"))
	require.Contains(t, page.body, "Saved.")
	require.Contains(t, page.body, "mornings")

	// Another human's digest page is 404, and so are its forms.
	_, other := b.human(t)
	require.Equal(t, http.StatusNotFound, other.get(loc).status)
	require.Equal(t, http.StatusNotFound, other.post(loc+"/send", nil).status)
	require.Equal(t, http.StatusNotFound, other.post(loc+"/delete", nil).status)
	require.Equal(t, 1, b.f.Count(`SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`))

	del := c.post(loc+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, del.status)
	require.Zero(t, b.count(t, "digests"))
}

// Deleting a digest asks first, as every other Delete does: the page links
// to a GET confirmation (which changes nothing) whose button posts it.
func TestDigestDeleteAsksFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, withDigestSources)
	id, c := b.human(t)
	scope := hostid.Human(id)
	conn := b.gotifyConnection(t, id, scope, "https://push.example.net", "gtfya.web")
	sink := b.gotifySink(t, id, scope, conn.ID, "phone")
	res := c.post("/digests", url.Values{"name": {"morning"}, "schedule": {"daily 09:00"}, "sink_ids": {strconv.FormatInt(sink.ID, 10)}, "skip_when_quiet": {"1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	loc := res.header.Get("Location")

	page := c.get(loc)
	require.Contains(t, page.body, `href="`+loc+`/delete" id="delete-digest"`)
	require.NotContains(t, page.body, `action="`+loc+`/delete"`, "no button deletes without asking")
	confirm := c.get(loc + "/delete")
	require.Equal(t, http.StatusOK, confirm.status, confirm.body)
	require.Contains(t, confirm.body, "Delete the digest “morning”?")
	require.Contains(t, confirm.body, `action="`+loc+`/delete"`)
	require.Contains(t, confirm.body, `href="`+loc+`"`, "Cancel goes back to the digest")
	require.Equal(t, 1, b.count(t, "digests"), "the confirmation page changes nothing")

	_, other := b.human(t)
	require.Equal(t, http.StatusNotFound, other.get(loc+"/delete").status)

	del := c.post(loc+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, del.status)
	require.Equal(t, "/digests?notice=digest_deleted&owner=human%3A"+strconv.FormatInt(id, 10), del.header.Get("Location"))
	require.Contains(t, c.get(del.header.Get("Location")).body, "Digest deleted.")
	require.Zero(t, b.count(t, "digests"))
	require.Equal(t, http.StatusNotFound, c.get(loc+"/delete").status)
}

// The digest page reads for a person (issue 19 item 9): its owner by name,
// the next send in the schedule's own zone, "Last sent" that a send (even
// Send now, which spends no scheduled slot) updates, and the preview as a
// report with a heading per queue and its figures in words.
func TestDigestPageReadsForAPerson(t *testing.T) {
	t.Parallel()
	b := setup(t, withDigestSources)
	id := b.f.Human("Grace Hopper")
	c := b.login(t, id)
	scope := hostid.Human(id)
	conn := b.gotifyConnection(t, id, scope, "https://push.example.net", "gtfya.web")
	sink := b.gotifySink(t, id, scope, conn.ID, "phone")
	queue := b.f.Queue(scope, "forge")
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build <failed>"})
	require.NoError(t, err)
	_, err = b.deps.Todos.Interrupt(b.ctx, id, todo.ID)
	require.NoError(t, err)
	dg, err := b.deps.Digests.Create(b.ctx, engine.HumanPrincipal(hostid.String(id)), digests.Input{Owner: scope, Name: "morning",
		Schedule: "TZ=America/Los_Angeles Mon-Fri 09:00", SinkIDs: []int64{sink.ID}})
	require.NoError(t, err)
	loc := "/board/digests/" + strconv.FormatInt(dg.ID, 10)

	page := c.get(loc)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, between(t, page.body, `id="digest-owner">`, `</dd>`), "Grace Hopper", "the owner by name")
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	next := between(t, page.body, `id="next-send">`, `</dd>`)
	require.Contains(t, next, dg.NextSendAt.In(la).Format("Mon 2 Jan 2006 15:04 MST"), "in the schedule's zone")
	require.Contains(t, next, "09:00")
	require.Contains(t, next, "(America/Los_Angeles)")
	require.Equal(t, "never", strings.TrimSpace(between(t, page.body, `id="last-sent">`, `</dd>`)))

	report := between(t, page.body, `id="digest-report"`, `</article>`)
	require.Contains(t, report, "<h3>Queue forge</h3>")
	require.Contains(t, report, "No todos wait to be claimed.")
	require.Contains(t, report, "1 dead letter since then.")
	require.Contains(t, report, `<a href="/board/todos/`+strconv.FormatInt(todo.ID, 10)+`">Nightly build &lt;failed&gt;</a>`)
	require.Contains(t, report, "<h3>Agents that did not answer a wake-up</h3>")
	require.NotContains(t, report, "doorbell", "no jargon")
	require.Contains(t, report, "Unavailable: not measured on this instance.")
	require.NotContains(t, report, "Pending: 0", "figures in words, not the sink's text")

	// Send now: Last sent says when, and how.
	sent := c.post(loc+"/send", nil)
	require.Equal(t, http.StatusSeeOther, sent.status, sent.body)
	page = c.get(sent.header.Get("Location"))
	last := between(t, page.body, `id="last-sent">`, `</dd>`)
	require.NotContains(t, last, "never")
	require.Contains(t, last, "sent by hand")
	require.Contains(t, last, time.Now().In(la).Format("Mon 2 Jan 2006"))
}

// TestDigestListAgreesWithItsPage: the digests list says what the digest
// page says (issue 25 item 3): the owner by name, the next send in the
// schedule's zone, "Last sent" read from the runs (a Send now counts),
// the sinks by name; the page's latest runs are in the schedule's zone.
func TestDigestListAgreesWithItsPage(t *testing.T) {
	t.Parallel()
	b := setup(t, withDigestSources)
	id := b.f.Human("Grace Hopper")
	c := b.login(t, id)
	scope := hostid.Human(id)
	conn := b.gotifyConnection(t, id, scope, "https://push.example.net", "gtfya.web")
	phone := b.gotifySink(t, id, scope, conn.ID, "phone")
	pager := b.gotifySink(t, id, scope, conn.ID, "pager")
	dg, err := b.deps.Digests.Create(b.ctx, engine.HumanPrincipal(hostid.String(id)), digests.Input{Owner: scope, Name: "morning",
		Schedule: "TZ=America/Los_Angeles Mon-Fri 09:00", SinkIDs: []int64{phone.ID, pager.ID}})
	require.NoError(t, err)
	loc := "/board/digests/" + strconv.FormatInt(dg.ID, 10)
	sent := c.post(loc+"/send", nil)
	require.Equal(t, http.StatusSeeOther, sent.status, sent.body)

	list := c.get("/digests")
	require.Equal(t, http.StatusOK, list.status, list.body)
	require.Contains(t, list.body, "Digests of Grace Hopper", "the owner by name")
	require.NotContains(t, list.body, "Digests of human")
	row := between(t, list.body, `href="`+loc+`"`, `</tr>`)
	page := c.get(loc)
	require.Equal(t, http.StatusOK, page.status, page.body)
	pageNext := between(t, page.body, `id="next-send">`, `</dd>`)
	require.Contains(t, pageNext, "(America/Los_Angeles)")
	require.Contains(t, row, `<td class="next-send">`+pageNext+`</td>`, "the same next send as the page")
	pageLast, _, _ := strings.Cut(between(t, page.body, `id="last-sent">`, `</dd>`), " <span")
	require.NotEqual(t, "never", pageLast)
	require.Contains(t, row, `<td class="last-sent">`+pageLast+`</td>`, "Last sent from the runs, as on the page")
	require.Contains(t, row, `<td class="targets">phone, pager</td>`)
	require.NotContains(t, row, "sink(s)")
	require.Contains(t, between(t, page.body, `id="digest-targets">`, `</dd>`), "phone, pager")
	runs := between(t, page.body, `<h2>Latest runs</h2>`, `</table>`)
	require.Contains(t, runs, "(America/Los_Angeles)", "the runs in the schedule's zone")
	require.NotContains(t, runs, " UTC")
}
