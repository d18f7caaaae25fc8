package web

import (
	"net/http"

	"github.com/switchboard/notify/notifytype"
)

// routeBoard adds the board pages every message links to (D13), behind
// the web session and scope-checked: an item of a scope the human has no
// part in is not_found, exactly like one that does not exist (D3). Each
// page lives in its own file (board_todos.go, board_queues.go,
// board_notifications.go).
func (s *server) routeBoard(mux *http.ServeMux) {
	mux.Handle("GET /board/todos/{id}", s.authed(s.boardTodo))
	mux.Handle("GET /board/queues/{name}", s.authed(s.boardQueue))
	mux.Handle("GET /board/notifications", s.authed(s.boardNotifications))
}

// myScopes is every owner scope the human is part of: their own and their
// teams'.
func (s *server) myScopes(r *http.Request, a *actor) ([]notifytype.OwnerScope, error) {
	opts, err := s.scopeOptions(r.Context(), a)
	if err != nil {
		return nil, err
	}
	out := make([]notifytype.OwnerScope, len(opts))
	for i, o := range opts {
		out[i] = o.Scope
	}
	return out, nil
}
