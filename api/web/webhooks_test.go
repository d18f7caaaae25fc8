package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

var secretRE = regexp.MustCompile(`<code id="webhook-secret">(sbw_[^<]+)</code>`)

func TestWebhookPages(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	hooks := host.NewWebhooks(host.WebhooksConfig{Pool: b.pool, Emitter: b.eng, SecretKey: b.eng.Config().SecretKey})
	b.deps.Webhooks = hooks
	b.serve(t)
	human, c := b.human(t)
	scope := hostid.Human(human)
	b.f.Sink(storetest.SinkOpts{Owner: scope, Name: "phone"})

	// Create: the URL and the secret are shown, the secret only this once.
	res := c.once(c.post("/webhooks", url.Values{"name": {"forge"}, "trusted_senders": {"octocat\ndependabot"}}), "secret_shown")
	require.Equal(t, 1, b.count(t, "webhooks"), "loading the secret's page twice creates one webhook")
	m := secretRE.FindStringSubmatch(res.body)
	require.NotNil(t, m, res.body)
	secret := notifytype.NewSecret(m[1])
	list, err := hooks.List(b.ctx, engine.HumanPrincipal(hostid.String(human)), scope)
	require.NoError(t, err)
	require.Len(t, list, 1)
	hook := list[0]
	require.Contains(t, res.body, fmt.Sprintf("%s/hooks/%d", b.srv.URL, hook.ID))
	page := c.get(fmt.Sprintf("/webhooks/%d", hook.ID))
	require.Equal(t, http.StatusOK, page.status)
	require.NotContains(t, page.body, secret.Reveal(), "never shown again")
	require.Contains(t, page.body, fmt.Sprintf("/hooks/%d", hook.ID))

	// A rule naming no sink of this owner is refused next to the form.
	res = c.post(fmt.Sprintf("/webhooks/%d/rules", hook.ID), url.Values{"name": {"pager"}, "expr": {"true"}, "notify": {"nope"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ := res.refusal(t)
	require.Equal(t, "invalid_argument", code)
	require.Equal(t, "action.notify", field)
	require.Zero(t, b.count(t, "webhook_rules"))

	res = c.post(fmt.Sprintf("/webhooks/%d/rules", hook.ID), url.Values{
		"name": {"bots"}, "expr": {`.sender.login == "dependabot"`}, "drop": {"1"}, "notify": {"phone"},
	})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)

	body := `{"sender":{"login":"dependabot"},"issue":{"number":3,"title":"Bump <b>left-pad</b>"}}`
	got, err := hooks.Receive(b.ctx, hook.ID, []byte(body), host.Sign(secret, host.NewMessageID(), time.Now(), []byte(body)))
	require.NoError(t, err)
	spam := `{"sender":{"login":"mallory"}}`
	quarantined, err := hooks.Receive(b.ctx, hook.ID, []byte(spam), host.Sign(secret, host.NewMessageID(), time.Now(), []byte(spam)))
	require.NoError(t, err)

	page = c.get(fmt.Sprintf("/webhooks/%d", hook.ID))
	require.Contains(t, page.body, `<code>.sender.login == &#34;dependabot&#34;</code>`, "the rules")
	require.Contains(t, page.body, fmt.Sprintf(`/board/webhooks/%d/deliveries/%d`, hook.ID, got.DeliveryID), "recent deliveries")
	require.Contains(t, between(t, page.body, `id="quarantine"`, `</section>`), "mallory", "the quarantine")
	require.NotContains(t, between(t, page.body, `id="quarantine"`, `</section>`), "dependabot")

	// The board link opens the delivery with its trace, scope-checked.
	board := c.get(fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, got.DeliveryID))
	require.Equal(t, http.StatusOK, board.status, board.body)
	require.Contains(t, board.body, "dropped")
	require.Contains(t, between(t, board.body, `id="notified"`, `</dd>`), "phone")
	require.Contains(t, board.body, "Bump &lt;b&gt;left-pad&lt;/b&gt;", "sender text is escaped")
	_, other := b.human(t)
	require.Equal(t, http.StatusNotFound, other.get(fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, got.DeliveryID)).status)
	require.Equal(t, http.StatusNotFound, other.get(fmt.Sprintf("/webhooks/%d", hook.ID)).status)
	require.Equal(t, http.StatusNotFound, c.get(fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, quarantined.DeliveryID+100)).status)

	// Dry run: a report, nothing sent or saved.
	rules := b.count(t, "webhook_rules")
	res = c.post(fmt.Sprintf("/webhooks/%d/test", hook.ID), url.Values{"name": {"all"}, "expr": {"true"}, "notify": {"phone"}})
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Contains(t, between(t, res.body, `id="dry-run-report"`, `</table>`), "would notify phone; would create no todo")
	require.NotContains(t, res.body, "unrouted")
	require.Equal(t, rules, b.count(t, "webhook_rules"))

	// Rotation shows a new secret once.
	rotate := c.post(fmt.Sprintf("/webhooks/%d/secret", hook.ID), nil)
	res = c.once(rotate, "secret_shown")
	require.Contains(t, res.body, "the old one stopped working just now")
	m = secretRE.FindStringSubmatch(res.body)
	require.NotNil(t, m)
	require.NotEqual(t, secret.Reveal(), m[1])
	require.Equal(t, http.StatusNotFound, other.post(fmt.Sprintf("/webhooks/%d/secret", hook.ID), nil).status)
	// Another human, even with the flash cookie copied over, sees no
	// secret.
	for _, ck := range rotate.header.Values("Set-Cookie") {
		if strings.HasPrefix(ck, "sb_flash=") {
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+fmt.Sprintf("/webhooks/%d/secret", hook.ID), nil)
			require.NoError(t, err)
			req.Header.Set("Cookie", strings.SplitN(ck, ";", 2)[0])
			stolen := other.do(req)
			require.NotContains(t, stolen.body, m[1])
		}
	}
	require.False(t, strings.Contains(b.logs.String(), m[1]), "no secret in the logs")
}

// Delete asks first, as every Delete does: the webhook page links to a GET
// confirmation page (which changes nothing), whose button posts the
// delete. Only who may create the webhook may delete it; afterwards its
// deliveries' board pages still open and say the webhook is gone.
func TestWebhookDeleteAsksFirst(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	hooks := host.NewWebhooks(host.WebhooksConfig{Pool: b.pool, Emitter: b.eng, SecretKey: b.eng.Config().SecretKey})
	b.deps.Webhooks = hooks
	b.serve(t)
	human, c := b.human(t)
	p := engine.HumanPrincipal(hostid.String(human))
	scope := hostid.Human(human)
	hook, secret, err := hooks.Create(b.ctx, p, host.WebhookInput{Owner: scope, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	_, err = hooks.AddRule(b.ctx, p, hook.ID, host.RuleInput{Name: "all", Expr: "true", Action: host.RuleAction{Drop: true}})
	require.NoError(t, err)
	body := `{"sender":{"login":"octocat"}}`
	got, err := hooks.Receive(b.ctx, hook.ID, []byte(body), host.Sign(secret, host.NewMessageID(), time.Now(), []byte(body)))
	require.NoError(t, err)
	path := fmt.Sprintf("/webhooks/%d", hook.ID)
	board := fmt.Sprintf("/board/webhooks/%d/deliveries/%d", hook.ID, got.DeliveryID)

	page := c.get(path)
	require.Contains(t, page.body, `href="`+path+`/delete" id="delete-webhook"`)
	confirm := c.get(path + "/delete")
	require.Equal(t, http.StatusOK, confirm.status, confirm.body)
	require.Contains(t, confirm.body, `action="`+path+`/delete"`)
	require.Contains(t, confirm.body, "Delete the webhook “forge”?")
	require.Contains(t, confirm.body, "1 rule and its secret go with it")
	require.Equal(t, 1, b.count(t, "webhooks"), "the confirmation page changes nothing")

	// Another human: both the page and the post are 404 (D3).
	_, other := b.human(t)
	require.Equal(t, http.StatusNotFound, other.get(path+"/delete").status)
	require.Equal(t, http.StatusNotFound, other.post(path+"/delete", nil).status)
	require.Equal(t, 1, b.count(t, "webhooks"))

	res := c.post(path+"/delete", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/webhooks?notice=webhook_deleted&owner=human%3A"+fmt.Sprint(human), res.header.Get("Location"))
	list := c.get(res.header.Get("Location"))
	require.Contains(t, list.body, "Webhook deleted.")
	require.Zero(t, b.count(t, "webhooks"))
	require.Zero(t, b.count(t, "webhook_rules"))
	require.Equal(t, 1, b.count(t, "webhook_deliveries"))
	require.Equal(t, http.StatusNotFound, c.get(path).status)
	require.Equal(t, http.StatusNotFound, c.get(path+"/delete").status)

	// The link a message carried still opens, for its owner only.
	opened := c.get(board)
	require.Equal(t, http.StatusOK, opened.status, opened.body)
	require.Contains(t, opened.body, `id="webhook-deleted"`)
	require.Contains(t, opened.body, "dropped")
	require.Equal(t, http.StatusNotFound, other.get(board).status)

	writes, err := store.ListWrites(b.ctx, b.pool, host.ObjectWebhook, hook.ID)
	require.NoError(t, err)
	require.Equal(t, host.WriteWebhookDelete, writes[len(writes)-1].Action)
	require.Equal(t, hostid.String(human), writes[len(writes)-1].HumanID)
}

// The rule form picks its queue and its sink by name (issue 19 item 7):
// the queue from those the webhook may route to (its owner's and those
// befriended to it, never another's), the sink from its owner's; a
// refusal is shown under the field it is about, in the form's words, and
// keeps what was typed.
func TestWebhookRuleFormPicksByName(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	hooks := host.NewWebhooks(host.WebhooksConfig{Pool: b.pool, Emitter: b.eng, SecretKey: b.eng.Config().SecretKey})
	b.deps.Webhooks = hooks
	b.serve(t)
	human, c := b.human(t)
	p := engine.HumanPrincipal(hostid.String(human))
	scope := hostid.Human(human)
	friendID, _ := b.human(t)
	friend := hostid.Human(friendID)
	builds := b.f.Queue(scope, "builds")
	shared := b.f.Queue(friend, "friends-inbox")
	require.NoError(t, hooks.BefriendQueue(b.ctx, friendID, shared, scope))
	private := b.f.Queue(friend, "friends-private")
	b.f.Sink(storetest.SinkOpts{Owner: scope, Name: "phone"})
	b.f.Sink(storetest.SinkOpts{Owner: friend, Name: "friends-phone"})
	hook, _, err := hooks.Create(b.ctx, p, host.WebhookInput{Owner: scope, Name: "forge", TrustedSenders: []string{"octocat"}})
	require.NoError(t, err)
	path := fmt.Sprintf("/webhooks/%d", hook.ID)

	page := c.get(path)
	require.Equal(t, http.StatusOK, page.status, page.body)
	queues := between(t, page.body, `id="rule-queue"`, `</select>`)
	require.Contains(t, queues, fmt.Sprintf(`<option value="%d">builds</option>`, builds))
	require.Regexp(t, fmt.Sprintf(`<option value="%d">friends-inbox \(shared by [^<]+\)</option>`, shared), queues)
	require.NotContains(t, queues, "friends-private", "a queue not befriended is not offered")
	sinks := between(t, page.body, `id="rule-notify"`, `</select>`)
	require.Contains(t, sinks, `<option value="phone">phone (gotify)</option>`)
	require.NotContains(t, sinks, "friends-phone", "another owner's sink is not offered")
	require.NotContains(t, page.body, "Queue id", "no ids to type")

	// Picked by name: saved, and listed by the queue's name.
	res := c.post(path+"/rules", url.Values{"name": {"builds"}, "expr": {"true"}, "queue": {itoa(builds)}, "notify": {"phone"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	page = c.get(path)
	require.Contains(t, between(t, page.body, `id="rules"`, `</table>`), "route to queue <strong>builds</strong>")
	rules, err := hooks.Rules(b.ctx, p, hook.ID)
	require.NoError(t, err)
	require.Len(t, rules, 1)

	// A queue it may not route to (a forged form): refused under the queue,
	// in words, the rest kept.
	res = c.post(path+"/rules", url.Values{"name": {"sneaky"}, "expr": {"true"}, "queue": {itoa(private)}})
	require.Equal(t, http.StatusBadRequest, res.status)
	code, field, _ := res.refusal(t)
	require.Equal(t, "invalid_argument", code)
	require.Equal(t, "action.queue", field)
	form := between(t, res.body, `id="add-rule"`, `</form>`)
	under := between(t, form, `id="error-queue"`, `</p>`)
	require.Contains(t, under, "this webhook may not route to that queue")
	require.NotContains(t, under, "action.queue")
	require.Contains(t, form, `id="rule-queue" aria-invalid="true" aria-describedby="error-queue"`)
	require.Contains(t, form, `value="sneaky"`, "what was typed is kept")
	require.Contains(t, between(t, res.body, `id="refusal"`, `</div>`), "check Route to queue below")

	// A rule that does nothing: said under the action's inputs.
	res = c.post(path+"/rules", url.Values{"name": {"idle"}, "expr": {"true"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Contains(t, between(t, res.body, `id="add-rule"`, `</form>`), `id="error-action"`)
	require.Contains(t, res.body, "pick a queue to route to, tick Drop, or pick a sink to notify")

	// An edit refused: shown in that rule's form, opened, not in the add form.
	rule := rules[0]
	res = c.post(fmt.Sprintf("%s/rules/%d", path, rule.ID), url.Values{"name": {"builds"}, "expr": {"true"}, "queue": {itoa(builds)}, "drop": {"1"}})
	require.Equal(t, http.StatusBadRequest, res.status)
	edit := between(t, res.body, fmt.Sprintf(`id="edit-rule-%d"`, rule.ID), `</form>`)
	require.Contains(t, edit, `id="error-action"`)
	require.Contains(t, edit, "pick a queue or Drop, not both")
	require.Contains(t, res.body, `<details class="rule-edit" open>`)
	require.NotContains(t, between(t, res.body, `id="add-rule"`, `</form>`), "field-error")
	require.Equal(t, 1, b.count(t, "webhook_rules"), "nothing changed")
}
