package rest_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
)

// TestQueuesAndTodos creates a queue, enqueues a todo, interrupts it (a
// dead letter, announced to a subscribed sink) and re-queues it, through
// the API alone; then checks the same refusals as every surface.
func TestQueuesAndTodos(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGotify(t, http.StatusOK)
	me, tok := b.human(t)

	q := b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/queues", `{"name":"builds"}`)
	var queue struct {
		ID    int64  `json:"id"`
		Owner string `json:"owner"`
		Name  string `json:"name"`
	}
	q.into(t, &queue)
	require.Equal(t, "builds", queue.Name)
	require.Equal(t, hostid.Human(me).String(), queue.Owner)

	var listed struct {
		Queues []struct {
			ID      int64  `json:"id"`
			Name    string `json:"name"`
			Pending int    `json:"pending"`
			Dead    int    `json:"dead"`
		} `json:"queues"`
	}
	b.ok(t, http.StatusOK, tok, "GET", "/api/v1/queues", nil).into(t, &listed)
	require.Len(t, listed.Queues, 1)
	require.Equal(t, queue.ID, listed.Queues[0].ID)

	// A sink subscribed to dead letters of this queue only.
	sink := b.sink(t, tok, "", b.connection(t, tok, "", g.URL))
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/sinks/"+strconv.FormatInt(sink, 10)+"/subscriptions",
		fmt.Sprintf(`{"event_types":["todo.dead_lettered"],"queues":[%d]}`, queue.ID))

	qpath := "/api/v1/queues/" + strconv.FormatInt(queue.ID, 10) + "/todos"
	var todo struct {
		ID         int64  `json:"id"`
		State      string `json:"state"`
		DeadReason string `json:"dead_reason"`
		BoardPath  string `json:"board_path"`
		AttemptCap int    `json:"attempt_cap"`
	}
	b.ok(t, http.StatusCreated, tok, "POST", qpath, `{"title":"Nightly build failed","attempt_cap":2,"payload":{"body":"x"}}`).into(t, &todo)
	require.Equal(t, "pending", todo.State)
	require.Equal(t, 2, todo.AttemptCap)
	require.Equal(t, "/board/todos/"+strconv.FormatInt(todo.ID, 10), todo.BoardPath)

	tpath := "/api/v1/todos/" + strconv.FormatInt(todo.ID, 10)
	b.ok(t, http.StatusOK, tok, "POST", tpath+"/interrupt", nil).into(t, &todo)
	require.Equal(t, "dead", todo.State)
	require.Equal(t, "interrupted", todo.DeadReason)
	require.Equal(t, 1, b.count(t, "outbox_events"), "the dead letter is announced in the same transaction")

	// Scenario: Filtered subscription
	// A dead letter on another queue of the same owner matches nothing.
	var inbox struct {
		ID int64 `json:"id"`
	}
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/queues", `{"name":"inbox"}`).into(t, &inbox)
	var elsewhere struct {
		ID int64 `json:"id"`
	}
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/queues/"+strconv.FormatInt(inbox.ID, 10)+"/todos", `{"title":"elsewhere"}`).into(t, &elsewhere)
	b.ok(t, http.StatusOK, tok, "POST", "/api/v1/todos/"+strconv.FormatInt(elsewhere.ID, 10)+"/interrupt", nil)
	require.Equal(t, 1, b.count(t, "outbox_events"), "only the builds dead letter is announced")

	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", tpath+"/interrupt", nil)
	require.Equal(t, "id", e.Field)
	b.ok(t, http.StatusOK, tok, "POST", tpath+"/requeue", nil).into(t, &todo)
	require.Equal(t, "pending", todo.State)
	e = b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", tpath+"/requeue", nil)
	require.Equal(t, "id", e.Field)

	// Bad input names its field and changes nothing.
	before := b.counts(t)
	require.Equal(t, "title", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", qpath, `{"title":" "}`).Field)
	require.Equal(t, "payload", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", qpath, `{"title":"t","payload":[1]}`).Field)
	require.Equal(t, "lease_ttl_seconds", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", qpath, `{"title":"t","lease_ttl_seconds":-1}`).Field)
	require.Equal(t, "name", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", "/api/v1/queues", `{"name":"builds"}`).Field, "taken")
	require.Equal(t, "name", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", "/api/v1/queues", `{"name":"a/b"}`).Field)
	require.Equal(t, "owner", b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", "/api/v1/queues", `{"name":"x","owner":"nobody"}`).Field)
	require.Equal(t, before, b.counts(t))

	// Another human sees none of it: every route answers not_found.
	other, otherTok := b.human(t)
	b.ok(t, http.StatusOK, otherTok, "GET", "/api/v1/queues", nil).into(t, &listed)
	require.Empty(t, listed.Queues)
	b.refused(t, http.StatusNotFound, "not_found", otherTok, "GET", "/api/v1/queues?owner="+hostid.Human(me).String(), nil)
	b.refused(t, http.StatusNotFound, "not_found", otherTok, "POST", "/api/v1/queues", `{"name":"mine","owner":"`+hostid.Human(me).String()+`"}`)
	b.refused(t, http.StatusNotFound, "not_found", otherTok, "POST", qpath, `{"title":"t"}`)
	b.refused(t, http.StatusNotFound, "not_found", otherTok, "POST", tpath+"/interrupt", nil)
	b.refused(t, http.StatusNotFound, "not_found", otherTok, "POST", tpath+"/requeue", nil)
	require.Equal(t, before, b.counts(t))

	// In a team: a member lists and enqueues, only owners and admins
	// create queues.
	team := b.w.F.Team("")
	b.w.F.Member(team, me, "owner")
	b.w.F.Member(team, other, "member")
	teamScope := hostid.Team(team).String()
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/queues", `{"name":"team-builds","owner":"`+teamScope+`"}`).into(t, &queue)
	b.refused(t, http.StatusForbidden, "forbidden", otherTok, "POST", "/api/v1/queues", `{"name":"nope","owner":"`+teamScope+`"}`)
	b.ok(t, http.StatusOK, otherTok, "GET", "/api/v1/queues?owner="+teamScope, nil).into(t, &listed)
	require.Len(t, listed.Queues, 1)
	b.ok(t, http.StatusCreated, otherTok, "POST", "/api/v1/queues/"+strconv.FormatInt(queue.ID, 10)+"/todos", `{"title":"from a member"}`)
}
