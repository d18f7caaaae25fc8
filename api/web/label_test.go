package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host"
)

// A notification's item reads as its title while the row keeps one, and as
// the item its link names once the row is finished and keeps only place
// and link: never an empty link.
func TestNoteLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    history.Notification
		want string
	}{
		{history.Notification{Title: "Nightly build failed", LinkPath: "/board/todos/12"}, "Nightly build failed"},
		{history.Notification{LinkPath: "/board/todos/12", EventType: host.EventTodoDeadLettered}, "todo 12"},
		{history.Notification{LinkPath: "/board/webhooks/3/deliveries/9", EventType: host.EventRuleNotify}, "delivery 9"},
		{history.Notification{LinkPath: "/board/digests/4", EventType: engine.EventDigest}, "digest 4"},
		{history.Notification{Title: "  ", EventType: engine.EventAgentNotify}, "An agent paged its owner"},
		{history.Notification{LinkPath: "/board/todos/x", EventType: host.EventTodoDeadLettered}, "A todo dead-lettered"},
	} {
		require.Equal(t, c.want, noteLabel(c.n), "%+v", c.n)
	}
}
