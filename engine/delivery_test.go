package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
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

func TestDeliveryGotifyDelivers(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	eng := w.Serve()
	sink := w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.token-1"})

	w.Emit(eng, deadLetterOf(scope, 1))
	a := w.Wait()
	require.Equal(t, sink, a.SinkID)
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 1, a.Attempt)

	msgs := g.received()
	require.Len(t, msgs, 1)
	require.Equal(t, "Dead letter in forge: nightly build", msgs[0].Title)
	require.Equal(t, 8, msgs[0].Priority, "high maps to 8 by default")
	require.Equal(t, "gtfya.token-1", msgs[0].Token)
	require.Contains(t, msgs[0].Message, "https://switchboard.example.net/board/todos/1")
	require.Equal(t, map[string]int{"delivered": 1}, w.RowStates())

	var status string
	var counts bool
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT status, counts_budget FROM switchboard.delivery_records WHERE sink_id = $1`, sink).Scan(&status, &counts))
	require.Equal(t, "delivered", status)
	require.True(t, counts)
}

func TestDeliverySinkDown(t *testing.T) {
	t.Parallel()
	// Scenario: Sink down
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	g.setStatus(http.StatusBadGateway)
	_, p, scope := w.Human()
	eng := w.Serve()
	w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.token-2"})

	w.Emit(eng, deadLetterOf(scope, 2))
	var due []time.Duration
	for k := 1; k <= engine.MaxAttempts; k++ {
		a := w.Wait()
		require.Equal(t, k, a.Attempt)
		require.Equal(t, notifytype.ClassServer, a.Class)
		due = append(due, w.Clock.Since(enginetest.Start))
		if k < engine.MaxAttempts {
			require.Equal(t, "pending", a.State)
			w.Clock.Advance(engine.RetryDelay(k+1) - engine.RetryDelay(k))
		} else {
			require.Equal(t, "undeliverable", a.State)
		}
	}
	require.Equal(t, []time.Duration{0, 30 * time.Second, 90 * time.Second, 210 * time.Second, 450 * time.Second, 930 * time.Second, 1890 * time.Second}, due)
	require.Len(t, g.received(), engine.MaxAttempts)

	var state, class string
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state, last_class FROM switchboard.outbox`).Scan(&state, &class))
	require.Equal(t, "undeliverable", state)
	require.Equal(t, "server", class)
	// An hour later nothing more is attempted.
	w.Clock.Advance(time.Hour)
	require.Len(t, g.received(), engine.MaxAttempts)
}

// A sink whose row another transaction holds (an edit, say) is skipped by
// the reservation rather than waited for: the other sinks' rows are sent
// meanwhile, and the held-up sink's row once the edit ends, exactly once.
func TestASinkLockedElsewhereHoldsUpOnlyItself(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	admin := w.Engine() // not serving: the rows are written before the edit begins
	edited := w.Sink(admin, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.edited"})
	other := w.Sink(admin, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.other"})
	w.Emit(admin, deadLetterOf(scope, 1))

	tx, err := w.Pool.Begin(w.Ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(w.Ctx) }()
	_, err = tx.Exec(w.Ctx, `UPDATE switchboard.sinks SET name = name || '-renamed' WHERE id = $1`, edited)
	require.NoError(t, err)

	w.Serve()
	a := w.Wait()
	require.Equal(t, other, a.SinkID, "the other sink is not held up by the edit")
	require.Equal(t, "delivered", a.State)
	var state string
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT state FROM switchboard.outbox WHERE sink_id = $1`, edited).Scan(&state))
	require.Equal(t, "claimed", state, "the edited sink's row waits, claimed")
	require.Len(t, g.received(), 1)

	require.NoError(t, tx.Commit(w.Ctx))
	a = w.Wait()
	require.Equal(t, edited, a.SinkID)
	require.Equal(t, "delivered", a.State)
	require.Equal(t, 1, a.Attempt)
	require.Len(t, g.received(), 2, "each sink sent once")
	require.Equal(t, map[string]int{"delivered": 2}, w.RowStates())
}
