package demo

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/web"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// The demo's names in the demo owner's scope.
const (
	gotifyName  = "demo-gotify"
	appriseName = "demo-apprise"
	queueName   = "forge"
	agentName   = "demo-agent"
)

// World is the demo owner's configured world.
type World struct {
	HumanID    int64
	QueueID    int64
	EndpointID int64
	// DigestID is the demo owner's morning digest (to the demo sinks and
	// the local Cairn stand-in).
	DigestID  int64
	Receivers *Receivers
}

// Setup gives the demo human a sink of each kind on the local receivers
// (replacing those of an earlier run, whose ports are gone), subscribed to
// dead letters, relay exhaustion and agent pages; a queue; and an endpoint
// to claim its todos with. The engine must allow plain HTTP to loopback.
func Setup(ctx context.Context, d httpx.Deps, rec *Receivers, humanID int64) (*World, error) {
	p, owner := engine.HumanPrincipal(hostid.String(humanID)), hostid.Human(humanID)
	sinks, err := d.Engine.ListSinks(ctx, p, owner)
	if err != nil {
		return nil, fmt.Errorf("error listing demo sinks: %w", err)
	}
	for _, s := range sinks {
		if s.Name == gotifyName || s.Name == appriseName {
			if err := d.Engine.DeleteSink(ctx, p, s.ID); err != nil {
				return nil, fmt.Errorf("error replacing demo sink: %w", err)
			}
		}
	}
	conns, err := d.Engine.ListConnections(ctx, p, owner)
	if err != nil {
		return nil, fmt.Errorf("error listing demo connections: %w", err)
	}
	for _, c := range conns {
		if c.Name == gotifyName || c.Name == appriseName {
			if err := d.Engine.DeleteConnection(ctx, p, c.ID); err != nil {
				return nil, fmt.Errorf("error replacing demo connection: %w", err)
			}
		}
	}
	events := []notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted, engine.EventAgentNotify}
	for _, k := range []struct {
		name, kind, url, secret string
		options                 json.RawMessage
	}{
		{gotifyName, engine.KindGotify, rec.GotifyURL, "gtfya.demo-application-token", nil},
		{appriseName, engine.KindApprise, rec.AppriseURL, "", json.RawMessage(`{"config_key":"demo"}`)},
	} {
		c, err := d.Engine.CreateConnection(ctx, p, engine.ConnectionInput{
			Owner: owner, Kind: k.kind, Name: k.name, BaseURL: k.url, Secret: notifytype.NewSecret(k.secret),
		})
		if err != nil {
			return nil, fmt.Errorf("error creating demo connection %s: %w", k.name, err)
		}
		s, err := d.Engine.CreateSink(ctx, p, engine.SinkInput{
			Owner: owner, Name: k.name, Kind: k.kind, ConnectionID: c.ID, Options: k.options,
		})
		if err != nil {
			return nil, fmt.Errorf("error creating demo sink %s: %w", k.name, err)
		}
		if _, err := d.Engine.AddSubscription(ctx, p, s.ID, engine.SubscriptionInput{EventTypes: events}); err != nil {
			return nil, fmt.Errorf("error subscribing demo sink %s: %w", k.name, err)
		}
	}
	queue, err := d.Todos.EnsureQueue(ctx, owner, queueName)
	if err != nil {
		return nil, err
	}
	endpoints, err := d.Endpoints.List(ctx, humanID, owner)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(endpoints, func(e host.Endpoint) bool { return e.Name == agentName && e.RevokedAt == nil })
	var endpoint int64
	if i >= 0 {
		endpoint = endpoints[i].ID
	} else {
		e, _, err := d.Endpoints.Vend(ctx, humanID, owner, agentName, nil)
		if err != nil {
			return nil, fmt.Errorf("error vending the demo endpoint: %w", err)
		}
		endpoint = e.ID
	}
	digest, err := setupDigest(ctx, d, rec, humanID)
	if err != nil {
		return nil, err
	}
	return &World{HumanID: humanID, QueueID: queue, EndpointID: endpoint, DigestID: digest, Receivers: rec}, nil
}

//go:embed demo.html
var pages embed.FS

var page = template.Must(template.ParseFS(pages, "demo.html"))

// Handler serves GET /demo (the receivers' inbox and the button) and POST
// /demo/dead-letter to the demo human's web session, inside the web UI's
// layout and with its styled refusal of cross-origin forms.
func Handler(d httpx.Deps, w *World) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /demo", func(rw http.ResponseWriter, r *http.Request) {
		hum, ok := w.allowed(d, rw, r)
		if !ok {
			return
		}
		var body bytes.Buffer
		if err := page.Execute(&body, map[string]any{
			"Inbox": w.Receivers.Inbox(), "Status": d.Engine.AllSinkStatuses(), "Made": r.URL.Query().Get("made"),
		}); err != nil {
			httpx.WriteError(rw, r, d.Logger, fmt.Errorf("error rendering the demo page: %w", err))
			return
		}
		web.RenderShell(rw, r, http.StatusOK, web.Shell{
			Title: "Watch a notification end to end", Nav: "demo", Human: &hum, Body: template.HTML(body.String()),
		})
	})
	mux.HandleFunc("POST /demo/dead-letter", func(rw http.ResponseWriter, r *http.Request) {
		if _, ok := w.allowed(d, rw, r); !ok {
			return
		}
		todo, err := w.deadLetter(r.Context(), d)
		if err != nil {
			httpx.WriteError(rw, r, d.Logger, err)
			return
		}
		http.Redirect(rw, r, "/demo?made="+strconv.FormatInt(todo.ID, 10), http.StatusSeeOther)
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(web.CrossOriginDenied())
	return cop.Handler(mux)
}

// allowed answers whether the request is the demo human's session, and
// redirects to /login when it is not.
func (w *World) allowed(d httpx.Deps, rw http.ResponseWriter, r *http.Request) (host.Human, bool) {
	p, err := d.Auth.Session(r.Context(), r)
	if err != nil || hostid.Number(p.HumanID) != w.HumanID {
		http.Redirect(rw, r, "/login", http.StatusSeeOther)
		return host.Human{}, false
	}
	hum, err := d.Accounts.HumanByID(r.Context(), hostid.Number(p.HumanID))
	if err != nil {
		httpx.WriteError(rw, r, d.Logger, err)
		return host.Human{}, false
	}
	return hum, true
}

// deadLetter makes a todo dead-letter the way an agent would: enqueued
// with one attempt, claimed by the demo endpoint (that todo, by id, never
// another pending one), failed at the cap.
func (w *World) deadLetter(ctx context.Context, d httpx.Deps) (host.Todo, error) {
	todo, err := d.Todos.Enqueue(ctx, w.QueueID, host.TodoInput{
		Title:      "Nightly build failed on main",
		Payload:    json.RawMessage(`{"body":"The issue body stays out of the message unless a subscription opts in."}`),
		AttemptCap: 1,
	})
	if err != nil {
		return host.Todo{}, err
	}
	claimed, ok, err := d.Todos.Claim(ctx, w.EndpointID, w.QueueID, host.ClaimOpts{TodoID: todo.ID})
	if err != nil {
		return host.Todo{}, err
	}
	if !ok {
		return host.Todo{}, fmt.Errorf("error claiming the demo todo %d: it is no longer pending", todo.ID)
	}
	return d.Todos.Fail(ctx, w.EndpointID, claimed.ID, host.AttemptReport{Summary: "Tests failed: 3 of 120 (demo)"})
}
