package digests_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// gotifyServer is a Gotify stand-in that records messages and answers
// with status (200 unless changed).
type gotifyServer struct {
	*httptest.Server
	mu       sync.Mutex
	status   int
	messages []gotifyMessage
}

type gotifyMessage struct {
	Title    string `json:"title"`
	Message  string `json:"message"`
	Priority int    `json:"priority"`
	Token    string `json:"-"`
	URL      string `json:"-"`
}

func newGotify(t *testing.T) *gotifyServer {
	g := &gotifyServer{status: http.StatusOK}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m gotifyMessage
		_ = json.Unmarshal(body, &m)
		m.Token, m.URL = r.Header.Get("X-Gotify-Key"), r.URL.String()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.messages = append(g.messages, m)
		w.WriteHeader(g.status)
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gotifyServer) setStatus(s int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status = s
}

func (g *gotifyServer) received() []gotifyMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gotifyMessage(nil), g.messages...)
}

func deadLetterOf(owner notifytype.OwnerScope, todo int64) engine.Event {
	return engine.Event{
		Type: host.EventTodoDeadLettered, Owner: owner, OccurrenceKey: host.DeadLetterKey(todo, 1),
		Content: host.WithTodo(sinks.Content{Title: "nightly build", Place: "forge", LinkPath: "/board/todos/1"},
			host.TodoContent{Cause: "fail at the cap", Attempts: 3}),
	}
}
