package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// The reference host's queues and todos (D15), so an operator can cause
// events, and try subscription filters, without writing Go. Every check is
// the host's (host.Todos): the same as the web UI's.

// queueCreate is POST /queues's body.
type queueCreate struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
}

// todoCreate is POST /queues/{id}/todos's body.
type todoCreate struct {
	Title      string          `json:"title"`
	Payload    json.RawMessage `json:"payload"`
	AttemptCap int             `json:"attempt_cap"`
	// LeaseTTLSeconds is the claim lease without a heartbeat.
	LeaseTTLSeconds int    `json:"lease_ttl_seconds"`
	OriginDisplay   string `json:"origin_display"`
	OriginPermalink string `json:"origin_permalink"`
}

// todoOut is a todo as the API answers it.
type todoOut struct {
	ID              int64                 `json:"id"`
	QueueID         int64                 `json:"queue_id"`
	Owner           notifytype.OwnerScope `json:"owner"`
	Title           string                `json:"title"`
	Payload         json.RawMessage       `json:"payload"`
	State           host.TodoState        `json:"state"`
	ClaimedBy       int64                 `json:"claimed_by,omitempty"`
	Attempts        int                   `json:"attempts"`
	AttemptCap      int                   `json:"attempt_cap"`
	DeadLetterCount int                   `json:"dead_letter_count"`
	DeadReason      host.Cause            `json:"dead_reason,omitempty"`
	BoardPath       string                `json:"board_path"`
	CreatedAt       time.Time             `json:"created_at"`
	UpdatedAt       time.Time             `json:"updated_at"`
}

func todoJSON(t host.Todo) todoOut {
	return todoOut{
		ID: t.ID, QueueID: t.QueueID, Owner: t.Owner, Title: t.Title, Payload: t.Payload, State: t.State,
		ClaimedBy: t.ClaimedBy, Attempts: t.Attempts, AttemptCap: t.AttemptCap, DeadLetterCount: t.DeadLetterCount,
		DeadReason: t.DeadReason, BoardPath: "/board/todos/" + itoaID(t.ID), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

func (s *server) listQueues(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	queues, err := s.d.Todos.ListQueues(r.Context(), hostid.Number(p.HumanID), owner)
	if err != nil {
		return err
	}
	return list(w, "queues", queues)
}

func (s *server) createQueue(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in queueCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	q, err := s.d.Todos.CreateQueue(r.Context(), hostid.Number(p.HumanID), owner, in.Name)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, q)
	return nil
}

func (s *server) enqueueTodo(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := pathID(r, "id", "queue")
	if err != nil {
		return err
	}
	var in todoCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.LeaseTTLSeconds < 0 {
		return notifytype.InvalidArgument("lease_ttl_seconds", "must be positive")
	}
	todo, err := s.d.Todos.EnqueueAs(r.Context(), hostid.Number(p.HumanID), id, host.TodoInput{
		Title: in.Title, Payload: in.Payload, AttemptCap: in.AttemptCap,
		LeaseTTL:      time.Duration(in.LeaseTTLSeconds) * time.Second,
		OriginDisplay: in.OriginDisplay, OriginPermalink: in.OriginPermalink,
	})
	if err != nil {
		return remapField(err, map[string]string{"lease_ttl": "lease_ttl_seconds"})
	}
	httpx.WriteJSON(w, http.StatusCreated, todoJSON(todo))
	return nil
}

func (s *server) interruptTodo(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	return s.todoVerb(w, r, p, s.d.Todos.Interrupt)
}

func (s *server) requeueTodo(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	return s.todoVerb(w, r, p, s.d.Todos.Requeue)
}

func (s *server) todoVerb(w http.ResponseWriter, r *http.Request, p engine.Principal,
	verb func(ctx context.Context, humanID, todoID int64) (host.Todo, error)) error {
	id, err := pathID(r, "id", "todo")
	if err != nil {
		return err
	}
	todo, err := verb(r.Context(), hostid.Number(p.HumanID), id)
	if err != nil {
		return remapField(err, map[string]string{"todo_id": "id"})
	}
	httpx.WriteJSON(w, http.StatusOK, todoJSON(todo))
	return nil
}

func itoaID(id int64) string { return strconv.FormatInt(id, 10) }
