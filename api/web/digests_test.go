package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

func withDigestSources(c *engine.Config) { c.DigestSources = host.NewDigestSources(c.Pool) }

func TestDigestPagesCreatePreviewSendNow(t *testing.T) {
	t.Parallel()
	b := setup(t, withDigestSources)
	id, c := b.human(t)
	scope := notifytype.Human(id)
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
	require.Contains(t, board.body, "Queue forge:")
	require.Contains(t, board.body, "unavailable: not measured on this instance")
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
		require.Contains(t, page.body, "Sent now to 1 sink(s); the scheduled send is unchanged.")
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
	scope := notifytype.Human(id)
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
