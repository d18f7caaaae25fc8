package web

import (
	"errors"
	"net/http"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// boardQueue is /board/queues/<name>: the queue of that name in the
// human's scopes (their own first, then their teams' by name; ?owner=
// picks one), with its latest todos. A name in none of them is not_found.
func (s *server) boardQueue(w http.ResponseWriter, r *http.Request, a *actor) {
	name := r.PathValue("name")
	scopes, err := s.myScopes(r, a)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	if r.URL.Query().Has("owner") {
		sc, err := a.scope(r)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		scopes = []notifytype.OwnerScope{sc}
	}
	for _, sc := range scopes {
		q, err := s.d.Todos.QueueByName(r.Context(), hostid.Number(a.P.HumanID), sc, name)
		if errors.Is(err, notifytype.ErrNotFound) {
			continue
		}
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		todos, err := s.d.Todos.ListTodos(r.Context(), hostid.Number(a.P.HumanID), q.ID, todosShown)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		s.render(w, r, http.StatusOK, "board_queue", a, view{
			Title: "Queue " + q.Name, Nav: "board", Scope: q.Owner,
			Data: queueData{Queue: q, Todos: todos},
		})
		return
	}
	s.fail(w, r, a, notifytype.NotFound("queue"))
}
