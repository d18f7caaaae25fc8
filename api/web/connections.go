package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/warnings"
	"github.com/switchboard/notify/notifytype"
)

// connForm is the connection form as the human typed it, less its secret
// fields: a secret is write-only and never goes back to a page, not even
// after a refusal.
type connForm struct {
	Kind, Name, AccountKey string
}

// connSecret reads the secret fields for kind: a token (gotify, cairn), or
// Apprise URLs one a line and an authorization header value, sent as the
// JSON the engine reads.
func connSecret(r *http.Request, kind string) notifytype.Secret {
	if kind != engine.KindApprise {
		return notifytype.NewSecret(strings.TrimSpace(r.PostFormValue("secret")))
	}
	var v struct {
		URLs          []string `json:"urls,omitempty"`
		Authorization string   `json:"authorization,omitempty"`
	}
	for line := range strings.Lines(r.PostFormValue("apprise_urls")) {
		if line = strings.TrimSpace(line); line != "" {
			v.URLs = append(v.URLs, line)
		}
	}
	v.Authorization = strings.TrimSpace(r.PostFormValue("apprise_authorization"))
	if len(v.URLs) == 0 && v.Authorization == "" {
		return notifytype.Secret{}
	}
	b, _ := json.Marshal(v) // strings always marshal
	return notifytype.NewSecret(string(b))
}

type connectionsData struct {
	Connections []engine.Connection
	Form        connForm
	Kinds       []string
}

func (s *server) connectionsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderConnections(w, r, a, scope, http.StatusOK, connForm{Kind: engine.KindGotify}, nil)
}

func (s *server) renderConnections(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form connForm, refusal error) {
	canWrite, readOnly, err := s.access(r.Context(), a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	conns, err := s.d.Engine.ListConnections(r.Context(), a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	v := view{
		Title: "Connections", Nav: "connections", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal),
		Data: connectionsData{Connections: conns, Form: form, Kinds: engine.ConnectionKinds},
	}
	// Just saved: warn when its address is one the guard will refuse.
	if id, err := strconv.ParseInt(r.URL.Query().Get("saved"), 10, 64); err == nil && refusal == nil {
		if i := slices.IndexFunc(conns, func(c engine.Connection) bool { return c.ID == id }); i >= 0 {
			v.Warning = warnings.Connection(r.Context(), s.d.Engine, conns[i])
		}
	}
	s.render(w, r, status, "connections", a, v)
}

// withoutUserInfo is a typed base URL fit to show again: anything between
// the scheme and an @ of the host part (a user name and password) is cut
// out.
func withoutUserInfo(v string) string {
	i := strings.Index(v, "://")
	if i < 0 {
		return v
	}
	authority, path, _ := strings.Cut(v[i+3:], "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return v
	}
	out := v[:i+3] + authority[at+1:]
	if len(v[i+3:]) > len(authority) {
		out += "/" + path
	}
	return out
}

func (s *server) createConnection(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := connForm{Kind: r.PostFormValue("kind"), Name: r.PostFormValue("name"), AccountKey: strings.TrimSpace(r.PostFormValue("account_key"))}
	conn, err := s.d.Engine.CreateConnection(r.Context(), a.P, engine.ConnectionInput{
		Owner: scope, Kind: form.Kind, Name: form.Name, BaseURL: form.AccountKey, Secret: connSecret(r, form.Kind),
	})
	if err == nil {
		seeOther(w, r, withNotice("/connections", "connection_created", &scope)+"&saved="+itoa(conn.ID))
		return
	}
	// What the human typed is shown again, less any user info of the base
	// URL (a password may hide there) and every secret field.
	form.AccountKey = withoutUserInfo(form.AccountKey)
	s.renderConnections(w, r, a, scope, httpx.StatusOf(err), form, err)
}

func (s *server) deleteConnection(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	id, err := pathID(r, "id", "connection")
	if err == nil {
		err = s.d.Engine.DeleteConnection(r.Context(), a.P, id)
	}
	if err == nil {
		seeOther(w, r, withNotice("/connections", "connection_deleted", &scope))
		return
	}
	s.renderConnections(w, r, a, scope, httpx.StatusOf(err), connForm{Kind: engine.KindGotify}, err)
}

// connectionData is one connection's edit page.
type connectionData struct {
	Conn engine.Connection
	Form connForm
}

// findConnection is the connection id of scope, not_found when the human
// cannot see it there.
func (s *server) findConnection(r *http.Request, a *actor, scope notifytype.OwnerScope) (engine.Connection, error) {
	id, err := pathID(r, "id", "connection")
	if err != nil {
		return engine.Connection{}, err
	}
	conns, err := s.d.Engine.ListConnections(r.Context(), a.P, scope)
	if err != nil {
		return engine.Connection{}, err
	}
	i := slices.IndexFunc(conns, func(c engine.Connection) bool { return c.ID == id })
	if i < 0 {
		return engine.Connection{}, notifytype.NotFound("connection")
	}
	return conns[i], nil
}

// connectionPage shows a connection's edit form: its name and base URL
// filled in, its secret fields blank (a secret is never shown; blank keeps
// it).
func (s *server) connectionPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err == nil {
		var c engine.Connection
		if c, err = s.findConnection(r, a, scope); err == nil {
			s.renderConnection(w, r, a, scope, http.StatusOK, c, connForm{Kind: c.Kind, Name: c.Name, AccountKey: c.BaseURL}, nil)
			return
		}
	}
	s.fail(w, r, a, err)
}

func (s *server) renderConnection(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, c engine.Connection, form connForm, refusal error) {
	canWrite, readOnly, err := s.access(r.Context(), a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "connection", a, view{
		Title: "Connection " + c.Name, Nav: "connections", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Err: s.public(r, refusal), Data: connectionData{Conn: c, Form: form},
	})
}

// editConnection renames a connection, changes its base URL, or replaces
// its secret: secret fields left blank keep the stored one. A refusal
// shows the form again with what was typed, never a secret.
func (s *server) editConnection(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	c, err := s.findConnection(r, a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := connForm{Kind: c.Kind, Name: r.PostFormValue("name"), AccountKey: strings.TrimSpace(r.PostFormValue("account_key"))}
	patch := engine.ConnectionPatch{Name: &form.Name, BaseURL: &form.AccountKey}
	typed := strings.TrimSpace(r.PostFormValue("secret")) != ""
	if c.Kind == engine.KindApprise {
		typed = strings.TrimSpace(r.PostFormValue("apprise_urls")) != "" || strings.TrimSpace(r.PostFormValue("apprise_authorization")) != ""
	}
	if typed {
		secret := connSecret(r, c.Kind)
		patch.Secret = &secret
	}
	if _, err = s.d.Engine.UpdateConnection(r.Context(), a.P, c.ID, patch); err == nil {
		seeOther(w, r, withNotice("/connections", "connection_saved", &scope)+"&saved="+itoa(c.ID))
		return
	}
	form.AccountKey = withoutUserInfo(form.AccountKey)
	s.renderConnection(w, r, a, scope, httpx.StatusOf(err), c, form, err)
}
