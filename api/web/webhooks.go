package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// The webhook pages: an owner creates a webhook and sees its URL, rotates
// its secret (shown once), edits its trusted senders and rules, dry-runs
// candidate rules, and reads its recent deliveries with their routing
// trace and its quarantine. Every check is host.Webhooks'.

func init() {
	pageNames = append(pageNames, "webhooks", "webhook", "webhook_secret", "board_delivery")
}

// webhookRoutes adds the webhook pages and the board page to mux.
func (s *server) webhookRoutes(mux *http.ServeMux) {
	mux.Handle("GET /webhooks", s.authed(s.webhooksPage))
	mux.Handle("POST /webhooks", s.authed(s.createWebhook))
	mux.Handle("GET /webhooks/{id}", s.authed(s.webhookPage))
	mux.Handle("POST /webhooks/{id}/settings", s.authed(s.webhookSettings))
	mux.Handle("POST /webhooks/{id}/secret", s.authed(s.rotateWebhookSecret))
	mux.Handle("GET /webhooks/{id}/secret", s.authed(s.webhookSecretPage))
	mux.Handle("POST /webhooks/{id}/delete", s.authed(s.deleteWebhook))
	mux.Handle("POST /webhooks/{id}/rules", s.authed(s.addWebhookRule))
	mux.Handle("POST /webhooks/{id}/rules/{rule}", s.authed(s.updateWebhookRule))
	mux.Handle("POST /webhooks/{id}/test", s.authed(s.testWebhookRules))
	mux.Handle("GET /board/webhooks/{id}/deliveries/{delivery}", s.authed(s.boardDelivery))
}

type webhookForm struct {
	Name, TrustedSenders string
}

type webhooksData struct {
	Webhooks []host.Webhook
	BaseURL  string
	Form     webhookForm
}

// lines splits a textarea or comma list into trimmed, non-empty items.
func lines(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == ',' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (s *server) webhooksPage(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderWebhooks(w, r, a, scope, http.StatusOK, webhookForm{}, nil)
}

func (s *server) renderWebhooks(w http.ResponseWriter, r *http.Request, a *actor, scope notifytype.OwnerScope, status int, form webhookForm, refusal error) {
	canWrite, readOnly, err := s.access(r.Context(), a, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	hooks, err := s.d.Webhooks.List(r.Context(), a.P, scope)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "webhooks", a, view{
		Title: "Webhooks", Nav: "webhooks", Scope: scope, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: noticeOf(r), Err: s.public(r, refusal), Data: webhooksData{Webhooks: hooks, BaseURL: s.d.BaseURL, Form: form},
	})
}

type secretData struct {
	Webhook host.Webhook
	URL     string
	Secret  string
	Rotated bool
}

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, a *actor) {
	scope, err := a.scope(r)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := webhookForm{Name: r.PostFormValue("name"), TrustedSenders: r.PostFormValue("trusted_senders")}
	hook, secret, err := s.d.Webhooks.Create(r.Context(), a.P, host.WebhookInput{
		Owner: scope, Name: form.Name, TrustedSenders: lines(form.TrustedSenders),
	})
	if err != nil {
		s.renderWebhooks(w, r, a, scope, httpx.StatusOf(err), form, err)
		return
	}
	s.showSecretOnce(w, r, a, hook.ID, secretFlash{Secret: secret.Reveal()})
}

// secretFlash is what a webhook's one-time secret page shows (flash.go).
type secretFlash struct {
	Secret  string `json:"secret"`
	Rotated bool   `json:"rotated,omitempty"`
}

// showSecretOnce redirects to the webhook's one-time secret page, which
// shows f once (post-redirect-get: a reload repeats nothing).
func (s *server) showSecretOnce(w http.ResponseWriter, r *http.Request, a *actor, id int64, f secretFlash) {
	path := "/webhooks/" + itoa(id) + "/secret"
	if err := s.setFlash(w, r, path, f); err != nil {
		s.fail(w, r, a, err)
		return
	}
	seeOther(w, r, path)
}

// webhookSecretPage shows a webhook's new secret, once: a second load (a
// reload, the back button, another browser) goes to the webhook's page.
func (s *server) webhookSecretPage(w http.ResponseWriter, r *http.Request, a *actor) {
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
	var f secretFlash
	if !s.takeFlash(w, r, &f) {
		seeOther(w, r, "/webhooks/"+itoa(id)+"?notice=secret_shown")
		return
	}
	title := "Webhook created"
	if f.Rotated {
		title = "Webhook secret rotated"
	}
	s.render(w, r, http.StatusOK, "webhook_secret", a, view{
		Title: title, Nav: "webhooks", Scope: hook.Owner,
		Data: secretData{Webhook: hook, URL: s.d.BaseURL + hook.Path, Secret: f.Secret, Rotated: f.Rotated},
	})
}

func (s *server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	secret, err := s.d.Webhooks.RotateSecret(r.Context(), a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.showSecretOnce(w, r, a, id, secretFlash{Secret: secret.Reveal(), Rotated: true})
}

// deleteWebhook deletes a webhook (after the confirmation page GET
// /webhooks/{id}/delete) and goes back to the webhooks of its scope. A
// refusal is shown on the webhook's page.
func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, a *actor) {
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
	if err := s.d.Webhooks.Delete(r.Context(), a.P, id); err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), ruleForm{}, nil, err, "")
		return
	}
	seeOther(w, r, withNotice("/webhooks", "webhook_deleted", &hook.Owner))
}

// ruleForm is a rule as the human typed it.
type ruleForm struct {
	Name, Expr, Queue, Notify, Severity string
	Drop                                bool
}

func ruleFormOf(r *http.Request) ruleForm {
	return ruleForm{
		Name: r.PostFormValue("name"), Expr: r.PostFormValue("expr"), Queue: strings.TrimSpace(r.PostFormValue("queue")),
		Notify: r.PostFormValue("notify"), Severity: r.PostFormValue("notify_severity"), Drop: r.PostFormValue("drop") != "",
	}
}

func (f ruleForm) input() (host.RuleInput, error) {
	in := host.RuleInput{Name: f.Name, Expr: f.Expr, Action: host.RuleAction{
		Drop: f.Drop, Notify: f.Notify, NotifySeverity: notifytype.Severity(f.Severity),
	}}
	if f.Queue != "" {
		q, err := strconv.ParseInt(f.Queue, 10, 64)
		if err != nil || q <= 0 {
			return in, notifytype.InvalidArgument("action.queue", "queue must be a queue id")
		}
		in.Action.Queue = q
	}
	return in, nil
}

type webhookData struct {
	Webhook    host.Webhook
	URL        string
	Rules      []host.Rule
	Deliveries []host.Delivery
	Quarantine []host.Delivery
	Form       ruleForm
	Report     *host.TestReport
	Severities []notifytype.Severity
}

func (s *server) webhookPage(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.renderWebhook(w, r, a, id, http.StatusOK, ruleForm{}, nil, nil, noticeOf(r))
}

func (s *server) renderWebhook(w http.ResponseWriter, r *http.Request, a *actor, id int64, status int, form ruleForm,
	report *host.TestReport, refusal error, notice string) {
	ctx := r.Context()
	hook, err := s.d.Webhooks.Get(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	canWrite, readOnly, err := s.access(ctx, a, hook.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	rules, err := s.d.Webhooks.Rules(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	recent, err := s.d.Webhooks.Deliveries(ctx, a.P, id, "", 20)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	quarantine, err := s.d.Webhooks.Deliveries(ctx, a.P, id, host.OutcomeQuarantined, 20)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "webhook", a, view{
		Title: "Webhook " + hook.Name, Nav: "webhooks", Scope: hook.Owner, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: notice, Err: s.public(r, refusal),
		Data: webhookData{
			Webhook: hook, URL: s.d.BaseURL + hook.Path, Rules: rules, Deliveries: recent, Quarantine: quarantine,
			Form: form, Report: report, Severities: notifytype.Severities,
		},
	})
}

func (s *server) webhookSettings(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	_, err = s.d.Webhooks.UpdateSettings(r.Context(), a.P, id, host.WebhookSettings{
		TrustedSenders: lines(r.PostFormValue("trusted_senders")),
		SenderExpr:     r.PostFormValue("sender_expr"), SubjectExpr: r.PostFormValue("subject_expr"),
	})
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), ruleForm{}, nil, err, "")
		return
	}
	seeOther(w, r, "/webhooks/"+strconv.FormatInt(id, 10))
}

func (s *server) addWebhookRule(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := ruleFormOf(r)
	in, err := form.input()
	if err == nil {
		_, err = s.d.Webhooks.AddRule(r.Context(), a.P, id, in)
	}
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, err, "")
		return
	}
	seeOther(w, r, "/webhooks/"+strconv.FormatInt(id, 10))
}

func (s *server) updateWebhookRule(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	ruleID, err := pathID(r, "rule", "rule")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := ruleFormOf(r)
	in, err := form.input()
	if err == nil {
		_, err = s.d.Webhooks.UpdateRule(r.Context(), a.P, id, ruleID, in)
	}
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), ruleForm{}, nil, err, "")
		return
	}
	seeOther(w, r, "/webhooks/"+strconv.FormatInt(id, 10))
}

// testWebhookRules dry-runs the candidate typed in the rule form (or the
// saved rules when the form is empty) and shows the report on the page.
func (s *server) testWebhookRules(w http.ResponseWriter, r *http.Request, a *actor) {
	id, err := pathID(r, "id", "webhook")
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	form := ruleFormOf(r)
	var candidates []host.RuleInput
	if strings.TrimSpace(form.Expr) != "" {
		in, err := form.input()
		if err != nil {
			s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, err, "")
			return
		}
		candidates = []host.RuleInput{in}
	}
	report, err := s.d.Webhooks.TestRules(r.Context(), a.P, id, candidates, 0)
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, err, "")
		return
	}
	s.renderWebhook(w, r, a, id, http.StatusOK, form, &report, nil, "Dry run: nothing was sent or saved.")
}
