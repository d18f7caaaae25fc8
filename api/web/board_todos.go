package web

import (
	"net/http"

	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// boardTodoData is a todo's board page.
type boardTodoData struct {
	Todo          host.TodoDetail
	Notifications []history.NotificationEvent
}

// boardTodo is /board/todos/<id>, where every dead-letter message links:
// the todo, its attempts, and the notifications sent about it with their
// delivery records.
func (s *server) boardTodo(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "todo")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	detail, err := s.d.Todos.TodoDetail(r.Context(), hostid.Number(a.P.HumanID), id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderBoardTodo(w, r, a, http.StatusOK, detail, nil)
}

func (s *server) renderBoardTodo(w http.ResponseWriter, r *http.Request, a *actor, status int, detail host.TodoDetail, refusal error) {
	notes, err := s.notificationEvents(r.Context(), a, []notifytype.OwnerScope{detail.Owner},
		"/board/todos/"+itoa(detail.ID), 0)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "board_todo", a, view{
		Title: "Todo " + clip(detail.Title, 80), Nav: "board", Scope: detail.Owner, CanWrite: true,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: boardTodoData{Todo: detail, Notifications: notes},
	})
}
