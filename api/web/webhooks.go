package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
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

// ruleForm is a rule as the human typed it. RuleID is the rule an edit
// form is about (0 for the add form), so a refusal is shown in the form
// it came from.
type ruleForm struct {
	RuleID                              int64
	Name, Expr, Queue, Notify, Severity string
	Drop                                bool
}

// Of reports that the form is the one of rule id (0: the add form).
func (f ruleForm) Of(id int64) bool { return f.RuleID == id }

// QueueIs reports that the form picks queue id.
func (f ruleForm) QueueIs(id int64) bool { return f.Queue == itoa(id) }

func ruleFormOf(r *http.Request) ruleForm {
	return ruleForm{
		Name: r.PostFormValue("name"), Expr: r.PostFormValue("expr"), Queue: strings.TrimSpace(r.PostFormValue("queue")),
		Notify: r.PostFormValue("notify"), Severity: r.PostFormValue("notify_severity"), Drop: r.PostFormValue("drop") != "",
	}
}

// FormFor is the form to show for rule r: what the human typed when the
// page answers their edit of it, else the rule as stored.
func (d webhookData) FormFor(r host.Rule) ruleForm {
	if d.Form.RuleID == r.ID {
		return d.Form
	}
	f := ruleForm{RuleID: r.ID, Name: r.Name, Expr: r.Expr, Notify: r.Action.Notify,
		Severity: string(r.Action.NotifySeverity), Drop: r.Action.Drop}
	if r.Action.Queue != 0 {
		f.Queue = itoa(r.Action.Queue)
	}
	return f
}

// SubjectWords says in words what the webhook reads as a delivery's
// subject and sender: the default expressions by what they read, a custom
// one as written.
func (d webhookData) SubjectWords() string {
	if d.Webhook.SubjectExpr == host.SubjectExprDefault {
		return "the repository and the issue or pull request number (for example org/repo#12)"
	}
	return ""
}

// SenderWords is SubjectWords for the sender expression.
func (d webhookData) SenderWords() string {
	if d.Webhook.SenderExpr == host.SenderExprDefault {
		return "the sender's login (GitHub's sender.login)"
	}
	return ""
}

// QueueName names a queue a rule routes to, by its name; a queue no
// longer routable is named by id.
func (d webhookData) QueueName(id int64) string {
	for _, q := range d.Queues {
		if q.ID == id {
			return q.Name
		}
	}
	return "queue " + itoa(id)
}

// ruleWords are the rule form's refusals in the form's words, by field:
// the service's messages name the API's fields.
var ruleWords = map[string]map[string]string{
	"action.notify": {
		"notify names no sink of this webhook's owner scope": "no sink of this webhook's owner has that name: pick one from the list",
	},
	"action.queue": {
		"is not a queue this webhook may route to": "this webhook may not route to that queue: pick one from the list",
	},
	"action": {
		"routes to a queue or drops, not both":     "pick a queue or Drop, not both",
		"does nothing: give queue, drop or notify": "it does nothing: pick a queue to route to, tick Drop, or pick a sink to notify",
	},
	"action.notify_severity": {
		"notify_severity needs notify": "a severity needs a sink to notify",
	},
}

// ruleRefusal says a rule form's refusal in the form's words, keeping the
// rule it names ("rule \"x\": …").
func ruleRefusal(err error) error {
	var e *notifytype.Error
	if !errors.As(err, &e) || e.Code != notifytype.CodeInvalidArgument {
		return err
	}
	// A dry run checks its one candidate as "rules[0]": the form has one.
	if rest, ok := strings.CutPrefix(e.Field, "rules[0]."); ok {
		out := *e
		out.Field, e = rest, &out
	}
	for api, words := range ruleWords[e.Field] {
		if i := strings.Index(e.Message, api); i >= 0 {
			out := *e
			lead := e.Message[:i]
			if j := strings.LastIndex(lead, ": "); j >= 0 {
				lead = lead[:j+2]
			} else {
				lead = ""
			}
			out.Message = lead + words
			return &out
		}
	}
	return e
}

func (f ruleForm) input() (host.RuleInput, error) {
	in := host.RuleInput{Name: f.Name, Expr: f.Expr, Action: host.RuleAction{
		Drop: f.Drop, Notify: f.Notify, NotifySeverity: notifytype.Severity(f.Severity),
	}}
	if f.Queue != "" {
		q, err := strconv.ParseInt(f.Queue, 10, 64)
		if err != nil || q <= 0 {
			return in, notifytype.InvalidArgument("action.queue", "pick a queue from the list")
		}
		in.Action.Queue = q
	}
	return in, nil
}

type webhookData struct {
	Webhook host.Webhook
	URL     string
	// Queues are the queues its rules may route to; Sinks the sinks of
	// its owner scope a rule may notify: the form's pickers.
	Queues     []host.RoutableQueue
	Sinks      []engine.Sink
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
	queues, err := s.d.Webhooks.RoutableQueues(ctx, a.P, id)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	sinks, err := s.d.Engine.ListSinks(ctx, a.P, hook.Owner)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	s.render(w, r, status, "webhook", a, view{
		Title: "Webhook " + hook.Name, Nav: "webhooks", Scope: hook.Owner, CanWrite: canWrite, ReadOnly: readOnly,
		Notice: notice, Err: s.public(r, refusal),
		Data: webhookData{
			Webhook: hook, URL: s.d.BaseURL + hook.Path, Queues: queues, Sinks: sinks, Rules: rules, Deliveries: recent, Quarantine: quarantine,
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
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, ruleRefusal(err), "")
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
	form.RuleID = ruleID
	in, err := form.input()
	if err == nil {
		_, err = s.d.Webhooks.UpdateRule(r.Context(), a.P, id, ruleID, in)
	}
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, ruleRefusal(err), "")
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
			s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, ruleRefusal(err), "")
			return
		}
		candidates = []host.RuleInput{in}
	}
	report, err := s.d.Webhooks.TestRules(r.Context(), a.P, id, candidates, 0)
	if err != nil {
		s.renderWebhook(w, r, a, id, httpx.StatusOf(err), form, nil, ruleRefusal(err), "")
		return
	}
	s.renderWebhook(w, r, a, id, http.StatusOK, form, &report, nil, "Dry run: nothing was sent or saved.")
}
