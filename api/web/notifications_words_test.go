package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// TestNotificationsOneEntryPerEventWithItsTitle: one dead letter announced
// to two sinks is one entry on the notifications page and on the todo's
// board page, titled with the todo's title even once delivered (the
// finished row keeps none, REQ-1: the title is read from the todo), with
// each sink and its state inside; a failed delivery says when it is
// retried and which attempt that is, not a bare "pending" (issue 25 item
// 5 and "Also").
func TestNotificationsOneEntryPerEventWithItsTitle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, c := b.human(t)
	scope := hostid.Human(id)
	conn := b.gotifyConnection(t, id, scope, "https://push.example.net", "gtfya.web")
	phone := b.gotifySink(t, id, scope, conn.ID, "phone")
	pager := b.gotifySink(t, id, scope, conn.ID, "pager")
	for _, s := range []int64{phone.ID, pager.ID} {
		b.f.Subscription(storetest.SubscriptionOpts{Sink: s, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	}
	queue := b.f.Queue(scope, "builds")
	todo, err := b.deps.Todos.Enqueue(b.ctx, queue, host.TodoInput{Title: "Nightly build failed on main"})
	require.NoError(t, err)
	_, err = b.deps.Todos.Interrupt(b.ctx, id, todo.ID)
	require.NoError(t, err)
	_, err = testhooks.FanOut(b.ctx, b.eng)
	require.NoError(t, err)
	require.Equal(t, 2, b.f.Count(`SELECT count(*) FROM switchboard.outbox`), "one row per sink")

	// phone: delivered, its payload cut to what a finished row keeps;
	// pager: failed once, retried later.
	due := time.Date(2026, 12, 4, 16, 40, 0, 0, time.UTC)
	_, err = b.pool.Exec(b.ctx, `UPDATE switchboard.outbox SET state = 'delivered', finished_at = now(),
		payload = jsonb_build_object('link_path', payload->'link_path', 'place', payload->'place') WHERE sink_id = $1`, phone.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(b.ctx, `UPDATE switchboard.outbox SET attempts = 1, last_class = 'server', due_at = $2 WHERE sink_id = $1`, pager.ID, due)
	require.NoError(t, err)

	for _, path := range []string{"/board/notifications", "/board/todos/" + itoa(todo.ID)} {
		page := c.get(path)
		require.Equal(t, http.StatusOK, page.status, page.body)
		list := between(t, page.body, `id="notifications"`, `</ol>`)
		require.Equal(t, 1, strings.Count(list, `<li class="event">`), "%s: one entry for one event", path)
		require.Regexp(t, `class="event-title">Nightly build failed on main</a>`, list, "%s: the title, kept once delivered", path)
		require.NotRegexp(t, regexp.MustCompile(`>todo \d+<`), list)
		require.Contains(t, list, `>phone</a>`)
		require.Contains(t, list, `>pager</a>`)
		require.Contains(t, list, `<span class="pill state-delivered">delivered</span>`)
		require.Contains(t, list, `<span class="pill state-pending">retrying at 16:40 UTC (attempt 2 of 7)</span>`)
	}
}
