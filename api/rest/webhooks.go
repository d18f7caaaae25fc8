package rest

import (
	"net/http"
	"strconv"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// Webhooks, their routing rules, deliveries and quarantine: thin over
// host.Webhooks, the service the web UI and the MCP rule verbs call too.

// webhookRoutes are the webhook routes, added to routes.
var webhookRoutes = []route{
	{"GET " + Prefix + "/webhooks", (*server).listWebhooks},
	{"POST " + Prefix + "/webhooks", (*server).createWebhook},
	{"GET " + Prefix + "/webhooks/{id}", (*server).getWebhook},
	{"PATCH " + Prefix + "/webhooks/{id}", (*server).updateWebhook},
	{"DELETE " + Prefix + "/webhooks/{id}", (*server).deleteWebhook},
	{"POST " + Prefix + "/webhooks/{id}/secret", (*server).rotateWebhookSecret},
	{"GET " + Prefix + "/webhooks/{id}/rules", (*server).listRules},
	{"PUT " + Prefix + "/webhooks/{id}/rules", (*server).setRules},
	{"POST " + Prefix + "/webhooks/{id}/rules", (*server).addRule},
	{"PUT " + Prefix + "/webhooks/{id}/rules/{rule}", (*server).updateRule},
	{"POST " + Prefix + "/webhooks/{id}/rules/test", (*server).testRules},
	{"GET " + Prefix + "/webhooks/{id}/deliveries", (*server).listWebhookDeliveries},
	{"GET " + Prefix + "/webhooks/{id}/deliveries/{delivery}", (*server).getWebhookDelivery},
}

func init() { routes = append(routes, webhookRoutes...) }

// webhookCreate is POST /webhooks's body.
type webhookCreate struct {
	Owner          string   `json:"owner"`
	Name           string   `json:"name"`
	TrustedSenders []string `json:"trusted_senders"`
	SenderExpr     string   `json:"sender_expr"`
	SubjectExpr    string   `json:"subject_expr"`
}

// webhookPatch is PATCH /webhooks/{id}'s body: an absent field keeps its
// value.
type webhookPatch struct {
	TrustedSenders *[]string `json:"trusted_senders"`
	SenderExpr     *string   `json:"sender_expr"`
	SubjectExpr    *string   `json:"subject_expr"`
}

// webhookWithSecret answers a create or a rotation: the secret, once.
type webhookWithSecret struct {
	host.Webhook
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

func (s *server) webhookID(r *http.Request) (int64, error) { return pathID(r, "id", "webhook") }

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	owner, err := ownerParam(r, p)
	if err != nil {
		return err
	}
	hooks, err := s.d.Webhooks.List(r.Context(), p, owner)
	if err != nil {
		return err
	}
	return list(w, "webhooks", hooks)
}

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	var in webhookCreate
	if err := decode(r, &in); err != nil {
		return err
	}
	owner, err := ownerOr(in.Owner, p)
	if err != nil {
		return err
	}
	hook, secret, err := s.d.Webhooks.Create(r.Context(), p, host.WebhookInput{
		Owner: owner, Name: in.Name, TrustedSenders: in.TrustedSenders, SenderExpr: in.SenderExpr, SubjectExpr: in.SubjectExpr,
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, webhookWithSecret{Webhook: hook, URL: s.d.BaseURL + hook.Path, Secret: secret.Reveal()})
	return nil
}

func (s *server) getWebhook(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	hook, err := s.d.Webhooks.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, hook)
	return nil
}

// deleteWebhook deletes a webhook with its rules and secret; its received
// deliveries stay until retention (host.Webhooks.Delete).
func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	if err := s.d.Webhooks.Delete(r.Context(), p, id); err != nil {
		return err
	}
	return noContent(w)
}

func (s *server) updateWebhook(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	var in webhookPatch
	if err := decode(r, &in); err != nil {
		return err
	}
	hook, err := s.d.Webhooks.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	set := host.WebhookSettings{TrustedSenders: hook.TrustedSenders, SenderExpr: hook.SenderExpr, SubjectExpr: hook.SubjectExpr}
	if in.TrustedSenders != nil {
		set.TrustedSenders = *in.TrustedSenders
	}
	if in.SenderExpr != nil {
		set.SenderExpr = *in.SenderExpr
	}
	if in.SubjectExpr != nil {
		set.SubjectExpr = *in.SubjectExpr
	}
	hook, err = s.d.Webhooks.UpdateSettings(r.Context(), p, id, set)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, hook)
	return nil
}

func (s *server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	secret, err := s.d.Webhooks.RotateSecret(r.Context(), p, id)
	if err != nil {
		return err
	}
	hook, err := s.d.Webhooks.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, webhookWithSecret{Webhook: hook, URL: s.d.BaseURL + hook.Path, Secret: secret.Reveal()})
	return nil
}

func (s *server) listRules(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	rules, err := s.d.Webhooks.Rules(r.Context(), p, id)
	if err != nil {
		return err
	}
	return list(w, "rules", rules)
}

// rulesBody is PUT /webhooks/{id}/rules's and POST .../rules/test's body.
type rulesBody struct {
	Rules []host.RuleInput `json:"rules"`
	Limit int              `json:"limit"`
}

func (s *server) setRules(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	var in rulesBody
	if err := decode(r, &in); err != nil {
		return err
	}
	rules, err := s.d.Webhooks.SetRules(r.Context(), p, id, in.Rules)
	if err != nil {
		return err
	}
	return list(w, "rules", rules)
}

func (s *server) addRule(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	var in host.RuleInput
	if err := decode(r, &in); err != nil {
		return err
	}
	rule, err := s.d.Webhooks.AddRule(r.Context(), p, id, in)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, rule)
	return nil
}

func (s *server) updateRule(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	ruleID, err := pathID(r, "rule", "rule")
	if err != nil {
		return err
	}
	var in host.RuleInput
	if err := decode(r, &in); err != nil {
		return err
	}
	rule, err := s.d.Webhooks.UpdateRule(r.Context(), p, id, ruleID, in)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, rule)
	return nil
}

func (s *server) testRules(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	var in rulesBody
	if err := decode(r, &in); err != nil {
		return err
	}
	report, err := s.d.Webhooks.TestRules(r.Context(), p, id, in.Rules, in.Limit)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, report)
	return nil
}

func (s *server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > host.DeliveriesListMax {
			return notifytype.InvalidArgumentf("limit", "must be 1 to %d", host.DeliveriesListMax)
		}
		limit = n
	}
	out, err := s.d.Webhooks.Deliveries(r.Context(), p, id, host.Outcome(r.URL.Query().Get("outcome")), limit)
	if err != nil {
		return err
	}
	return list(w, "deliveries", out)
}

func (s *server) getWebhookDelivery(w http.ResponseWriter, r *http.Request, p engine.Principal) error {
	id, err := s.webhookID(r)
	if err != nil {
		return err
	}
	deliveryID, err := pathID(r, "delivery", "delivery")
	if err != nil {
		return err
	}
	d, err := s.d.Webhooks.Delivery(r.Context(), p, id, deliveryID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, d)
	return nil
}
