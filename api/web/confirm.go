package web

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
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
	mux.Handle("GET /sinks/{id}/delete", s.confirmation(s.confirmDeleteSink))
	mux.Handle("GET /sinks/{id}/subscriptions/{sub}/delete", s.confirmation(s.confirmDeleteSubscription))
	mux.Handle("GET /connections/{id}/delete", s.confirmation(s.confirmDeleteConnection))
	mux.Handle("GET /endpoints/{id}/revoke", s.confirmation(s.confirmRevoke))
	mux.Handle("GET /webhooks/{id}/delete", s.confirmation(s.confirmDeleteWebhook))
	mux.Handle("GET /webhooks/{id}/rotate", s.confirmation(s.confirmRotateSecret))
	mux.Handle("GET /board/digests/{id}/delete", s.confirmation(s.confirmDeleteDigest))
}

// confirmation serves the page that ask describes (its title and its
// step), or the error ask met.
func (s *server) confirmation(ask func(r *http.Request, a *actor) (string, confirmData, error)) http.Handler {
	return s.authed(func(w http.ResponseWriter, r *http.Request, a *actor) {
		title, d, err := ask(r, a)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		s.render(w, r, http.StatusOK, "confirm", a, view{Title: title, Data: d})
	})
}

func (s *server) confirmDeleteSink(r *http.Request, a *actor) (string, confirmData, error) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return "", confirmData{}, err
	}
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	subs, err := s.d.Engine.ListSubscriptions(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	path := "/sinks/" + itoa(id)
	return "Delete sink " + sk.Name + "?", confirmData{
		Question: "Delete the sink “" + sk.Name + "”? It stops sending at once.",
		Detail:   "Its " + plural(len(subs), "subscription") + " go with it; its delivery records stay for 30 days. This cannot be undone.",
		Action:   path + "/delete", Button: "Delete sink", Cancel: path,
	}, nil
}

func (s *server) confirmDeleteSubscription(r *http.Request, a *actor) (string, confirmData, error) {
	id, err := pathID(r, "id", "sink")
	if err != nil {
		return "", confirmData{}, err
	}
	sub, err := pathID(r, "sub", "subscription")
	if err != nil {
		return "", confirmData{}, err
	}
	sk, err := s.d.Engine.GetSink(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	subs, err := s.d.Engine.ListSubscriptions(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	if !slices.ContainsFunc(subs, func(x engine.Subscription) bool { return x.ID == sub }) {
		return "", confirmData{}, notifytype.NotFound("subscription")
	}
	path := "/sinks/" + itoa(id)
	return "Delete subscription?", confirmData{
		Question: "Delete this subscription of the sink “" + sk.Name + "”?",
		Detail:   "The events it matched stop reaching this sink, unless another subscription matches them.",
		Action:   path + "/subscriptions/" + itoa(sub) + "/delete", Button: "Delete subscription", Cancel: path,
	}, nil
}

func (s *server) confirmDeleteConnection(r *http.Request, a *actor) (string, confirmData, error) {
	scope, err := a.scope(r)
	if err != nil {
		return "", confirmData{}, err
	}
	id, err := pathID(r, "id", "connection")
	if err != nil {
		return "", confirmData{}, err
	}
	conns, err := s.d.Engine.ListConnections(r.Context(), a.P, scope)
	if err != nil {
		return "", confirmData{}, err
	}
	i := slices.IndexFunc(conns, func(c engine.Connection) bool { return c.ID == id })
	if i < 0 {
		return "", confirmData{}, notifytype.NotFound("connection")
	}
	return "Delete connection " + conns[i].Name + "?", confirmData{
		Question: "Delete the connection “" + conns[i].Name + "” and its sealed secret?",
		Detail:   "A connection that a sink still uses cannot be deleted: delete or move those sinks first.",
		Action:   "/connections/" + itoa(id) + "/delete", Owner: scope.String(),
		Button: "Delete connection", Cancel: scopePath("/connections", scope),
	}, nil
}

func (s *server) confirmRevoke(r *http.Request, a *actor) (string, confirmData, error) {
	scope, err := a.scope(r)
	if err != nil {
		return "", confirmData{}, err
	}
	id, err := pathID(r, "id", "endpoint")
	if err != nil {
		return "", confirmData{}, err
	}
	eps, err := s.d.Endpoints.List(r.Context(), hostid.Number(a.P.HumanID), scope)
	if err != nil {
		return "", confirmData{}, err
	}
	i := slices.IndexFunc(eps, func(e host.Endpoint) bool { return e.ID == id && e.RevokedAt == nil })
	if i < 0 {
		return "", confirmData{}, notifytype.NotFound("endpoint")
	}
	return "Revoke endpoint " + eps[i].Name + "?", confirmData{
		Question: "Revoke the endpoint “" + eps[i].Name + "”? Its credential stops working at once.",
		Detail:   "Every todo it holds claimed dead-letters now, and its subscribers are told. This cannot be undone.",
		Action:   "/endpoints/" + itoa(id) + "/revoke", Owner: scope.String(),
		Button: "Revoke endpoint", Cancel: scopePath("/endpoints", scope),
	}, nil
}

// confirmRotateSecret asks before a webhook's secret is rotated: the old
// one stops working at once, so every sender must be given the new one.
func (s *server) confirmRotateSecret(r *http.Request, a *actor) (string, confirmData, error) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		return "", confirmData{}, err
	}
	hook, err := s.d.Webhooks.Get(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	if canWrite, _, err := s.access(r.Context(), a, hook.Owner); err != nil {
		return "", confirmData{}, err
	} else if !canWrite {
		return "", confirmData{}, notifytype.Forbidden("only the team's owners and admins may rotate its webhooks' secrets")
	}
	path := "/webhooks/" + itoa(id)
	return "Rotate the secret of " + hook.Name + "?", confirmData{
		Question: "Rotate the secret of the webhook “" + hook.Name + "”?",
		Detail: "The current secret stops working at once: deliveries signed with it are refused until every sender " +
			"has the new one, which is shown once on the next page.",
		Action: path + "/secret", Button: "Rotate secret", Cancel: path,
	}, nil
}

func (s *server) confirmDeleteWebhook(r *http.Request, a *actor) (string, confirmData, error) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		return "", confirmData{}, err
	}
	hook, err := s.d.Webhooks.Get(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	rules, err := s.d.Webhooks.Rules(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	path := "/webhooks/" + itoa(id)
	return "Delete webhook " + hook.Name + "?", confirmData{
		Question: "Delete the webhook “" + hook.Name + "”? Deliveries posted to its URL are refused from now on.",
		Detail: "Its " + plural(len(rules), "rule") + " and its secret go with it. The deliveries it received, its quarantine " +
			"and the todos it routed stay; received deliveries are kept for 30 days. This cannot be undone.",
		Action: path + "/delete", Button: "Delete webhook", Cancel: path,
	}, nil
}

func (s *server) confirmDeleteDigest(r *http.Request, a *actor) (string, confirmData, error) {
	id, err := pathID(r, "id", "digest")
	if err != nil {
		return "", confirmData{}, err
	}
	d, err := s.d.Digests.Get(r.Context(), a.P, id)
	if err != nil {
		return "", confirmData{}, err
	}
	path := "/board/digests/" + itoa(id)
	return "Delete digest " + d.Name + "?", confirmData{
		Question: "Delete the digest “" + d.Name + "”? It will not be sent again.",
		Detail:   "Its run history goes with it; digests already sent are unaffected. This cannot be undone.",
		Action:   path + "/delete", Button: "Delete digest", Cancel: path,
	}, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
