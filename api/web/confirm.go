package web

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// confirmData is a confirmation step before a destructive action: a GET
// page whose button posts the action. It works without JavaScript, and a
// link previewer that fetches the page changes nothing.
type confirmData struct {
	Question, Detail string
	Action           string // the POST path, built from parsed ids
	Owner            string // the owner scope to post along, if any
	Button           string
	Cancel           string
}

// routeConfirmations adds the GET confirmation page of each Delete and
// Revoke button.
func (s *server) routeConfirmations(mux *http.ServeMux) {
	mux.Handle("GET /sinks/{id}/delete", s.authed(s.confirmDeleteSink))
	mux.Handle("GET /sinks/{id}/subscriptions/{sub}/delete", s.authed(s.confirmDeleteSubscription))
	mux.Handle("GET /connections/{id}/delete", s.authed(s.confirmDeleteConnection))
	mux.Handle("GET /endpoints/{id}/revoke", s.authed(s.confirmRevoke))
	mux.Handle("GET /webhooks/{id}/delete", s.authed(s.confirmDeleteWebhook))
	mux.Handle("GET /board/digests/{id}/delete", s.authed(s.confirmDeleteDigest))
}

func (s *server) confirm(w http.ResponseWriter, r *http.Request, a *actor, title string, d confirmData) {
	s.render(w, r, http.StatusOK, "confirm", a, view{Title: title, Data: d})
}

func (s *server) confirmDeleteSink(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	subs, err := s.d.Engine.ListSubscriptions(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	path := "/sinks/" + itoa(id)
	s.confirm(w, r, a, "Delete sink "+sk.Name+"?", confirmData{
		Question: "Delete the sink “" + sk.Name + "”? It stops sending at once.",
		Detail:   "Its " + plural(len(subs), "subscription") + " go with it; its delivery records stay for 30 days. This cannot be undone.",
		Action:   path + "/delete", Button: "Delete sink", Cancel: path,
	})
}

func (s *server) confirmDeleteSubscription(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sub, err := pathID(r, "sub", "subscription")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	subs, err := s.d.Engine.ListSubscriptions(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	if !slices.ContainsFunc(subs, func(x engine.Subscription) bool { return x.ID == sub }) {
		s.fail(w, r, a, notifytype.NotFound("subscription"))
		return
	}
	path := "/sinks/" + itoa(id)
	s.confirm(w, r, a, "Delete subscription?", confirmData{
		Question: "Delete this subscription of the sink “" + sk.Name + "”?",
		Detail:   "The events it matched stop reaching this sink, unless another subscription matches them.",
		Action:   path + "/subscriptions/" + itoa(sub) + "/delete", Button: "Delete subscription", Cancel: path,
	})
}

func (s *server) confirmDeleteConnection(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	id, err := pathID(r, "id", "connection")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	conns, err := s.d.Engine.ListConnections(r.Context(), a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	i := slices.IndexFunc(conns, func(c engine.Connection) bool { return c.ID == id })
	if i < 0 {
		s.fail(w, r, a, notifytype.NotFound("connection"))
		return
	}
	s.confirm(w, r, a, "Delete connection "+conns[i].Name+"?", confirmData{
		Question: "Delete the connection “" + conns[i].Name + "” and its sealed secret?",
		Detail:   "A connection that a sink still uses cannot be deleted: delete or move those sinks first.",
		Action:   "/connections/" + itoa(id) + "/delete", Owner: scope.String(),
		Button: "Delete connection", Cancel: scopePath("/connections", scope),
	})
}

func (s *server) confirmRevoke(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	id, err := pathID(r, "id", "endpoint")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	eps, err := s.d.Endpoints.List(r.Context(), a.P.HumanID, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	i := slices.IndexFunc(eps, func(e host.Endpoint) bool { return e.ID == id && e.RevokedAt == nil })
	if i < 0 {
		s.fail(w, r, a, notifytype.NotFound("endpoint"))
		return
	}
	s.confirm(w, r, a, "Revoke endpoint "+eps[i].Name+"?", confirmData{
		Question: "Revoke the endpoint “" + eps[i].Name + "”? Its credential stops working at once.",
		Detail:   "Every todo it holds claimed dead-letters now, and its subscribers are told. This cannot be undone.",
		Action:   "/endpoints/" + itoa(id) + "/revoke", Owner: scope.String(),
		Button: "Revoke endpoint", Cancel: scopePath("/endpoints", scope),
	})
}

func (s *server) confirmDeleteWebhook(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	hook, err := s.d.Webhooks.Get(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	rules, err := s.d.Webhooks.Rules(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	path := "/webhooks/" + itoa(id)
	s.confirm(w, r, a, "Delete webhook "+hook.Name+"?", confirmData{
		Question: "Delete the webhook “" + hook.Name + "”? Deliveries posted to its URL are refused from now on.",
		Detail: "Its " + plural(len(rules), "rule") + " and its secret go with it. The deliveries it received, its quarantine " +
			"and the todos it routed stay; received deliveries are kept for 30 days. This cannot be undone.",
		Action: path + "/delete", Button: "Delete webhook", Cancel: path,
	})
}

func (s *server) confirmDeleteDigest(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	d, err := s.d.Engine.GetDigest(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	path := "/board/digests/" + itoa(id)
	s.confirm(w, r, a, "Delete digest "+d.Name+"?", confirmData{
		Question: "Delete the digest “" + d.Name + "”? It will not be sent again.",
		Detail:   "Its run history goes with it; digests already sent are unaffected. This cannot be undone.",
		Action:   path + "/delete", Button: "Delete digest", Cancel: path,
	})
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
