package web

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// grantInfo describes a verb family on the vend pages.
type grantInfo struct {
	Grant notifytype.Grant
	What  string
	// Warning is said before granting a family that lets the holder act on
	// the owner's alerts (REQ-5, REQ-6); such a family is never checked by
	// default.
	Warning string
}

// grantInfos lists every verb family in the order the pages show them. The
// defaults (notifytype.DefaultGrants) are checked; the others never are.
var grantInfos = []grantInfo{
	{Grant: notifytype.GrantTodos, What: "claim, heartbeat, complete and fail todos"},
	{Grant: notifytype.GrantRules, What: "read and change webhook routing rules"},
	{Grant: notifytype.GrantNotifications, What: "list, change, delete and test your notification sinks and their subscriptions",
		Warning: "Whoever holds this credential can redirect or silence your alerts: they can switch your sinks off, " +
			"point them at other connections of yours, or unsubscribe them from the events you rely on."},
	{Grant: notifytype.GrantNotifyOwner, What: "page you (notify_owner)",
		Warning: "Whoever holds this credential can page you: send messages to your sinks, up to 5 an hour. " +
			"Pages spend your sinks' budgets, so a flood of them can hold back your other alerts."},
}

// risky reports whether g needs the consent screen.
func risky(g notifytype.Grant) bool {
	return g == notifytype.GrantNotifications || g == notifytype.GrantNotifyOwner
}

// vendForm is the vend wizard as the human filled it in.
type vendForm struct {
	Name   string
	Owner  notifytype.OwnerScope
	Grants []notifytype.Grant
}

// Has reports whether the form grants g, for checkboxes.
func (f vendForm) Has(g notifytype.Grant) bool { return slices.Contains(f.Grants, g) }

type endpointsData struct {
	Endpoints []host.Endpoint
	Form      vendForm
	Grants    []grantInfo
	// Owners are the scopes the wizard offers: the human's own, and the
	// team shown when it is one.
	Owners []notifytype.OwnerScope
}

type consentData struct {
	Form   vendForm
	Safe   []notifytype.Grant // granted without asking again
	Risky  []grantInfo        // listed unchecked: each must be ticked to be granted
	Grants []grantInfo
}

type credentialData struct {
	Endpoint   host.Endpoint
	Credential string
	// MCPURL is this server's MCP endpoint; ClientConfig a ready client
	// configuration holding the credential (the README's JSON).
	MCPURL       string
	ClientConfig string
}

// clientConfig is the MCP client configuration for an endpoint's
// credential, as the README shows it.
func clientConfig(mcpURL, credential string) string {
	cfg := map[string]any{"mcpServers": map[string]any{"switchboard": map[string]any{
		"type": "http", "url": mcpURL, "headers": map[string]string{"Authorization": "Bearer " + credential},
	}}}
	b, _ := json.MarshalIndent(cfg, "", "  ") // maps of strings always marshal
	return string(b)
}

func (s *server) endpointsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := vendForm{Owner: scope, Grants: slices.Clone(notifytype.DefaultGrants)}
	s.renderEndpoints(w, r, a, scope, http.StatusOK, form, nil)
}

func (s *server) renderEndpoints(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form vendForm, refusal error) {
	canWrite, readOnly, err := s.access(r.Context(), a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	eps, err := s.d.Endpoints.List(r.Context(), hostid.Number(a.P.HumanID), scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	// The wizard offers every scope the human may vend in: their own and
	// the teams they own or administer.
	owners := []notifytype.OwnerScope{notifytype.Human(a.P.HumanID)}
	teams, err := s.dir.TeamsOf(r.Context(), hostid.Number(a.P.HumanID))
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	for _, t := range teams {
		if t.Role.CanConfigure() {
			owners = append(owners, t.Scope())
		}
	}
	if scope.Kind == notifytype.ScopeTeam && !slices.Contains(owners, scope) {
		owners = append(owners, scope)
	}
	s.render(w, r, status, "endpoints", a, view{
		Title: "Endpoints", Nav: "endpoints", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal),
		Data: endpointsData{Endpoints: eps, Form: form, Grants: grantInfos, Owners: owners},
	})
}

// readVendForm reads the wizard (or the consent screen, which posts the
// same fields).
func readVendForm(r *http.Request, a *actor) (vendForm, error) {
	scope, err := a.scope(r)
	if err != nil {
		return vendForm{}, err
	}
	f := vendForm{Name: r.PostFormValue("name"), Owner: scope, Grants: []notifytype.Grant{}}
	for _, g := range r.PostForm["grant"] {
		if !slices.Contains(f.Grants, notifytype.Grant(g)) {
			f.Grants = append(f.Grants, notifytype.Grant(g))
		}
	}
	return f, nil
}

// vend vends an endpoint from the wizard. A grant that includes
// notifications or notify_owner goes through the consent screen first,
// which lists those families unchecked with their warning; only what is
// ticked there is granted.
func (s *server) vend(w http.ResponseWriter, r *http.Request, a *actor) {
	form, err := readVendForm(r, a)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	if r.PostFormValue("consent") != "shown" && slices.ContainsFunc(form.Grants, risky) {
		// Nothing is checked until the scope is: a page for a scope the
		// human cannot vend in would only mislead.
		if _, _, err := s.access(r.Context(), a, form.Owner); err != nil {
			s.fail(w, r, a, err)
			return
		}
		data := consentData{Form: form, Grants: grantInfos}
		for _, g := range form.Grants {
			if !risky(g) {
				data.Safe = append(data.Safe, g)
			}
		}
		for _, gi := range grantInfos {
			if form.Has(gi.Grant) && risky(gi.Grant) {
				data.Risky = append(data.Risky, gi)
			}
		}
		s.render(w, r, http.StatusOK, "consent", a, view{Title: "Confirm what this endpoint may do", Nav: "endpoints", Scope: form.Owner, Data: data})
		return
	}
	s.doVend(w, r, a, form)
}

// quickVend vends an endpoint with the basics grant (todos and rules) in
// one press.
func (s *server) quickVend(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if name == "" {
		name = "agent-" + strings.ToLower(rand.Text()[:8])
	}
	s.doVend(w, r, a, vendForm{Name: name, Owner: scope, Grants: slices.Clone(notifytype.DefaultGrants)})
}

// doVend vends and shows the credential, once.
func (s *server) doVend(w http.ResponseWriter, r *http.Request, a *actor, form vendForm) {
	ep, secret, err := s.d.Endpoints.Vend(r.Context(), hostid.Number(a.P.HumanID), form.Owner, form.Name, form.Grants)
	if err != nil {
		if httpx.StatusOf(err) == http.StatusNotFound {
			s.fail(w, r, a, err)
			return
		}
		s.renderEndpoints(w, r, a, form.Owner, httpx.StatusOf(err), form, err)
		return
	}
	path := "/endpoints/" + itoa(ep.ID) + "/credential"
	if err := s.setFlash(w, r, path, credentialFlash{Owner: ep.Owner.String(), Credential: secret.Reveal()}); err != nil {
		s.fail(w, r, a, err)
		return
	}
	seeOther(w, r, path) // post-redirect-get: a reload vends nothing more
}

// credentialFlash is what an endpoint's one-time credential page shows
// (flash.go).
type credentialFlash struct {
	Owner      string `json:"owner"`
	Credential string `json:"credential"`
}

// credentialPage shows a vended endpoint's credential, once: a second load
// goes to the endpoints page.
func (s *server) credentialPage(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "endpoint")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	var f credentialFlash
	if !s.takeFlash(w, r, &f) {
		seeOther(w, r, "/endpoints?notice=credential_shown")
		return
	}
	scope, err := notifytype.ParseOwnerScope(f.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	eps, err := s.d.Endpoints.List(r.Context(), hostid.Number(a.P.HumanID), scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	i := slices.IndexFunc(eps, func(e host.Endpoint) bool { return e.ID == id })
	if i < 0 {
		s.fail(w, r, a, notifytype.NotFound("endpoint"))
		return
	}
	mcpURL := strings.TrimSuffix(s.d.BaseURL, "/") + "/mcp"
	s.render(w, r, http.StatusOK, "credential", a, view{
		Title: "Endpoint created", Nav: "endpoints", Scope: scope,
		Data: credentialData{Endpoint: eps[i], Credential: f.Credential, MCPURL: mcpURL,
			ClientConfig: clientConfig(mcpURL, f.Credential)},
	})
}

func (s *server) revoke(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	id, err := pathID(r, "id", "endpoint")
	if err == nil {
		err = s.d.Endpoints.Revoke(r.Context(), hostid.Number(a.P.HumanID), id)
	}
	if err == nil {
		seeOther(w, r, withNotice("/endpoints", "endpoint_revoked", &scope))
		return
	}
	form := vendForm{Owner: scope, Grants: slices.Clone(notifytype.DefaultGrants)}
	s.renderEndpoints(w, r, a, scope, httpx.StatusOf(err), form, err)
}
