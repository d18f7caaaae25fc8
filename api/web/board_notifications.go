package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// notificationsShown is how many notifications the board lists.
const notificationsShown = 50

// boardNotifications is /board/notifications, where a coalesced message
// links: the latest notifications of every scope of the human, each with
// its title, and each sink it went to with its state and delivery records
// (one entry per event, issue 25).
func (s *server) boardNotifications(w http.ResponseWriter, r *http.Request, a *actor) {
	scopes, err := s.myScopes(r, a)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	notes, err := s.notificationEvents(r.Context(), a, scopes, "", notificationsShown)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, http.StatusOK, "board_notifications", a, view{
		Title: "Notifications", Nav: "board", Data: notes,
	})
}

// notificationEvents lists the latest notification events of scopes, each
// titled: a finished notification keeps no title (REQ-1), so the title
// is read from the item its link names, which still has it.
func (s *server) notificationEvents(ctx context.Context, a *actor, scopes []notifytype.OwnerScope, linkPath string, limit int) ([]history.NotificationEvent, error) {
	events, err := history.RecentNotificationEvents(ctx, s.d.Engine, a.P, scopes, linkPath, limit)
	if err != nil {
		return nil, err
	}
	var owners, paths []string
	for _, sc := range scopes {
		owners = append(owners, sc.String())
	}
	for _, ev := range events {
		if ev.Title == "" && ev.LinkPath != "" {
			paths = append(paths, ev.LinkPath)
		}
	}
	if len(paths) == 0 {
		return events, nil
	}
	titles, err := host.ItemTitles(ctx, s.d.Pool, owners, paths)
	if err != nil {
		return nil, err
	}
	for i, ev := range events {
		if ev.Title == "" {
			events[i].Title = titles[ev.LinkPath]
		}
	}
	return events, nil
}

// stateWords says where one sink's notification stands, for a person: a
// pending one that failed before says when it is tried again,
// "retrying at 16:40 UTC (attempt 2 of 7)"; held reads "waiting for the
// sink's budget".
func stateWords(n history.Notification) string {
	switch n.State {
	case "pending":
		if n.Attempts > 0 {
			return "retrying at " + n.DueAt.UTC().Format("15:04 UTC") + " (attempt " +
				strconv.Itoa(n.Attempts+1) + " of " + strconv.Itoa(engine.MaxAttempts) + ")"
		}
		return "pending"
	case "held":
		return "waiting for the sink's budget"
	case "claimed":
		return "sending"
	case "partial":
		return "partly delivered"
	case "undeliverable":
		return "could not be delivered"
	}
	return n.State
}

// eventLabel names an event's item for people: its title, else what its
// link names ("todo 12"), never empty.
func eventLabel(ev history.NotificationEvent) string {
	return noteLabel(history.Notification{Title: ev.Title, LinkPath: ev.LinkPath, EventType: ev.EventType})
}
