package web

import (
	"net/http"
)

// notificationsShown is how many notifications the board lists.
const notificationsShown = 50

// boardNotifications is /board/notifications, where a coalesced message
// links: the latest notifications of every scope of the human, each with
// its sink, state and delivery records.
func (s *server) boardNotifications(w http.ResponseWriter, r *http.Request, a *actor) {
	scopes, err := s.myScopes(r, a)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	notes, err := s.d.Engine.RecentNotifications(r.Context(), a.P, scopes, "", notificationsShown)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, http.StatusOK, "board_notifications", a, view{
		Title: "Notifications", Nav: "board", Data: notes,
	})
}
