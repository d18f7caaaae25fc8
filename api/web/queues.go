package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// todosShown is how many todos a queue's page lists.
const todosShown = 50

// routeQueues adds the queues pages: the reference host's queues and todos,
// so a human can cause events (and try subscription filters) from the
// browser alone. Every check is the host's (host.Todos), as for the API.
func (s *server) routeQueues(mux *http.ServeMux) {
	mux.Handle("GET /queues", s.authed(s.queuesPage))
	mux.Handle("POST /queues", s.authed(s.createQueue))
	mux.Handle("GET /queues/{id}", s.authed(s.queuePage))
	mux.Handle("POST /queues/{id}/todos", s.authed(s.enqueue))
	mux.Handle("POST /todos/{id}/dead-letter", s.authed(s.deadLetterTodo))
	mux.Handle("POST /todos/{id}/requeue", s.authed(s.requeueTodo))
}

// queueForm is the create-queue form as typed.
type queueForm struct{ Name string }

// todoForm is the enqueue form as typed.
type todoForm struct {
	Title, Body, AttemptCap string
}

type queuesData struct {
	Queues []host.Queue
	Form   queueForm
}

type queueData struct {
	Queue host.Queue
	Todos []host.Todo
	Form  todoForm
}

func (s *server) queuesPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderQueues(w, r, a, scope, http.StatusOK, queueForm{}, nil)
}

func (s *server) renderQueues(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form queueForm, refusal error) {
	canWrite, readOnly, err := s.access(r.Context(), a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	queues, err := s.d.Todos.ListQueues(r.Context(), hostid.Number(a.P.HumanID), scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "queues", a, view{
		Title: "Queues", Nav: "queues", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: queuesData{Queues: queues, Form: form},
	})
}

func (s *server) createQueue(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := queueForm{Name: r.PostFormValue("name")}
	q, err := s.d.Todos.CreateQueue(r.Context(), hostid.Number(a.P.HumanID), scope, form.Name)
	if err == nil {
		seeOther(w, r, withNotice("/queues/"+itoa(q.ID), "queue_created", nil))
		return
	}
	s.renderQueues(w, r, a, scope, httpx.StatusOf(err), form, err)
}

func (s *server) queuePage(w http.ResponseWriter, r *http.Request, a *actor) {
	s.renderQueue(w, r, a, http.StatusOK, todoForm{}, nil)
}

func (s *server) renderQueue(w http.ResponseWriter, r *http.Request, a *actor, status int, form todoForm, refusal error) {
	id, err := pathID(r, "id", "queue")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	q, err := s.d.Todos.GetQueue(r.Context(), hostid.Number(a.P.HumanID), id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	todos, err := s.d.Todos.ListTodos(r.Context(), hostid.Number(a.P.HumanID), id, todosShown)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "queue", a, view{
		Title: "Queue " + q.Name, Nav: "queues", Scope: q.Owner, CanWrite: true,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: queueData{Queue: q, Todos: todos, Form: form},
	})
}

func (s *server) enqueue(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "queue")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := todoForm{Title: r.PostFormValue("title"), Body: r.PostFormValue("body"), AttemptCap: r.PostFormValue("attempt_cap")}
	in := host.TodoInput{Title: form.Title}
	if b := strings.TrimSpace(form.Body); b != "" {
		in.Payload = jsonObject("body", b)
	}
	if in.AttemptCap, err = budget("attempt_cap", form.AttemptCap); err == nil {
		_, err = s.d.Todos.EnqueueAs(r.Context(), hostid.Number(a.P.HumanID), id, in)
	}
	if err == nil {
		seeOther(w, r, withNotice("/queues/"+itoa(id), "todo_enqueued", nil))
		return
	}
	if httpx.StatusOf(err) == http.StatusNotFound {
		s.fail(w, r, a, err)
		return
	}
	s.renderQueue(w, r, a, httpx.StatusOf(err), form, err)
}

// deadLetterTodo interrupts a pending or claimed todo: it dead-letters at
// once, as a human's interrupt does (D15), and its subscribers are told.
func (s *server) deadLetterTodo(w http.ResponseWriter, r *http.Request, a *actor) {
	s.todoAction(w, r, a, "todo_dead_lettered", s.d.Todos.Interrupt)
}

// requeueTodo puts a dead todo back to pending.
func (s *server) requeueTodo(w http.ResponseWriter, r *http.Request, a *actor) {
	s.todoAction(w, r, a, "todo_requeued", s.d.Todos.Requeue)
}

func (s *server) todoAction(w http.ResponseWriter, r *http.Request, a *actor, notice string, act func(ctx context.Context, humanID, todoID int64) (host.Todo, error)) {
	id, err := pathID(r, "id", "todo")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	td, err := act(r.Context(), hostid.Number(a.P.HumanID), id)
	if err != nil {
		if httpx.StatusOf(err) == http.StatusNotFound {
			s.fail(w, r, a, err)
			return
		}
		// The todo's own page explains the refusal beside its state.
		detail, derr := s.d.Todos.TodoDetail(r.Context(), hostid.Number(a.P.HumanID), id)
		if derr != nil {
			s.fail(w, r, a, derr)
			return
		}
		s.renderBoardTodo(w, r, a, httpx.StatusOf(err), detail, err)
		return
	}
	back := "/queues/" + itoa(td.QueueID)
	if r.PostFormValue("back") == "board" {
		back = "/board/todos/" + itoa(td.ID)
	}
	seeOther(w, r, withNotice(back, notice, nil))
}
