package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

type webhookAnswer struct {
	host.Webhook
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// webhook creates a webhook through the API trusting octocat, with one rule
// and one received delivery, and returns their ids.
func (b *bundle) webhook(t *testing.T, token string) (hook, rule, delivery int64) {
	t.Helper()
	var created webhookAnswer
	b.ok(t, http.StatusCreated, token, "POST", "/api/v1/webhooks", map[string]any{
		"name": "forge", "trusted_senders": []string{"octocat"},
	}).into(t, &created)
	var r host.Rule
	b.ok(t, http.StatusCreated, token, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID), map[string]any{
		"name": "drop all", "expr": "true", "action": map[string]any{"drop": true},
	}).into(t, &r)
	body := []byte(`{"sender":{"login":"octocat"}}`)
	got, err := b.webhooks.Receive(b.w.Ctx, created.ID, body, host.Sign(notifytype.NewSecret(created.Secret), host.NewMessageID(), b.w.Clock.Now(), body))
	require.NoError(t, err)
	return created.ID, r.ID, got.DeliveryID
}

func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	var created webhookAnswer
	b.ok(t, http.StatusCreated, tok, "POST", "/api/v1/webhooks", map[string]any{
		"name": "forge", "trusted_senders": []string{"octocat"},
	}).into(t, &created)
	require.True(t, strings.HasPrefix(created.Secret, host.WebhookSecretPrefix), "the secret is shown on create")
	require.Equal(t, fmt.Sprintf("https://switchboard.example.net/hooks/%d", created.ID), created.URL)

	got := b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d", created.ID), nil)
	require.NotContains(t, string(got.body), created.Secret, "and never again")
	listed := b.ok(t, http.StatusOK, tok, "GET", "/api/v1/webhooks", nil)
	require.NotContains(t, string(listed.body), created.Secret)

	var rotated webhookAnswer
	b.ok(t, http.StatusOK, tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/secret", created.ID), nil).into(t, &rotated)
	require.NotEqual(t, created.Secret, rotated.Secret)

	// Rules: a bad one is refused naming the rule, and nothing is saved.
	e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID),
		map[string]any{"rules": []map[string]any{
			{"name": "ok", "expr": "true", "action": map[string]any{"drop": true}},
			{"name": "pager", "expr": "true", "action": map[string]any{"notify": "nope"}},
		}})
	require.Equal(t, "rules[1].action.notify", e.Field)
	require.Contains(t, e.Message, `"pager"`)
	require.Zero(t, b.count(t, "webhook_rules"))

	var rules struct{ Rules []host.Rule }
	b.ok(t, http.StatusOK, tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules", created.ID), map[string]any{"rules": []map[string]any{
		{"name": "issues", "expr": ".issue != null", "action": map[string]any{"drop": true}},
	}}).into(t, &rules)
	require.Len(t, rules.Rules, 1)
	var updated host.Rule
	b.ok(t, http.StatusOK, tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules/%d", created.ID, rules.Rules[0].ID),
		map[string]any{"name": "issues", "expr": ".issue.number > 1", "action": map[string]any{"drop": true}}).into(t, &updated)
	require.Equal(t, rules.Rules[0].ID, updated.ID)

	body := []byte(`{"sender":{"login":"octocat"},"issue":{"number":2}}`)
	_, err := b.webhooks.Receive(b.w.Ctx, created.ID, body, host.Sign(notifytype.NewSecret(rotated.Secret), host.NewMessageID(), b.w.Clock.Now(), body))
	require.NoError(t, err)
	var deliveries struct{ Deliveries []host.Delivery }
	b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d/deliveries", created.ID), nil).into(t, &deliveries)
	require.Len(t, deliveries.Deliveries, 1)
	require.Equal(t, host.OutcomeDropped, deliveries.Deliveries[0].Outcome)
	require.Equal(t, updated.ID, deliveries.Deliveries[0].Trace.DecidedBy)
	b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d/deliveries?outcome=lost", created.ID), nil)

	var report host.TestReport
	b.ok(t, http.StatusOK, tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules/test", created.ID), map[string]any{
		"rules": []map[string]any{{"name": "none", "expr": "false", "action": map[string]any{"drop": true}}},
	}).into(t, &report)
	require.Equal(t, host.OutcomeUnrouted, report.Deliveries[0].Outcome)

	// Another human sees none of it.
	_, other := b.human(t)
	for _, path := range []string{"", "/rules", "/deliveries", fmt.Sprintf("/deliveries/%d", deliveries.Deliveries[0].ID)} {
		b.refused(t, http.StatusNotFound, "not_found", other, "GET", fmt.Sprintf("/api/v1/webhooks/%d%s", created.ID, path), nil)
	}
	b.refused(t, http.StatusNotFound, "not_found", other, "POST", fmt.Sprintf("/api/v1/webhooks/%d/secret", created.ID), nil)
	require.NotContains(t, b.w.Logs.String(), rotated.Secret)
}

// DELETE /webhooks/{id}: the same permission as creating one, recorded in
// the write log; the rules and the secret go, the received deliveries and
// the todos it routed stay (as a sink's delivery records outlive it), and
// a subscription filtered to it is not widened.
func TestDeleteWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner, tok := b.human(t)
	hook, _, delivery := b.webhook(t, tok)
	queue := b.w.F.Queue(hostid.Human(owner), "forge")
	routed := b.w.F.Todo(hosttest.TodoOpts{Queue: queue})
	_, err := b.w.Pool.Exec(b.w.Ctx, `UPDATE todos SET webhook_id = $1 WHERE id = $2`, hook, routed)
	require.NoError(t, err)
	conn := b.connection(t, tok, "", "https://push.example.net")
	sink := b.sink(t, tok, "", conn)
	b.ok(t, http.StatusCreated, tok, "POST", sinkPath(sink, "/subscriptions"), map[string]any{
		"event_types": []string{"delivery.quarantined"}, "webhooks": []int64{hook},
	})
	path := fmt.Sprintf("/api/v1/webhooks/%d", hook)

	// Another human: 404, as for a webhook that does not exist (D3).
	_, other := b.human(t)
	b.refused(t, http.StatusNotFound, "not_found", other, "DELETE", path, nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "DELETE", "/api/v1/webhooks/999999", nil)
	require.Equal(t, 1, b.count(t, "webhooks"))

	// A team member may not delete the team's webhook; an admin may.
	admin, adminTok := b.human(t)
	member, memberTok := b.human(t)
	tm := b.w.F.Team("")
	b.w.F.Member(tm, admin, "admin")
	b.w.F.Member(tm, member, "member")
	var teamHook webhookAnswer
	b.ok(t, http.StatusCreated, adminTok, "POST", "/api/v1/webhooks", map[string]any{"owner": team(tm), "name": "team-forge"}).into(t, &teamHook)
	b.refused(t, http.StatusForbidden, "forbidden", memberTok, "DELETE", fmt.Sprintf("/api/v1/webhooks/%d", teamHook.ID), nil)
	require.Equal(t, 2, b.count(t, "webhooks"))
	b.ok(t, http.StatusNoContent, adminTok, "DELETE", fmt.Sprintf("/api/v1/webhooks/%d", teamHook.ID), nil)

	b.ok(t, http.StatusNoContent, tok, "DELETE", path, nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", path, nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "DELETE", path, nil)
	b.refused(t, http.StatusNotFound, "not_found", tok, "GET", path+"/rules", nil)
	require.Zero(t, b.count(t, "webhooks"))
	require.Zero(t, b.count(t, "webhook_rules"), "its rules go with it")
	require.Equal(t, 1, b.count(t, "webhook_deliveries"), "what it received stays until retention")
	require.Equal(t, 1, b.w.F.Count(`SELECT count(*) FROM todos WHERE id = $1 AND webhook_id IS NULL`, routed), "the todo it routed stays")
	require.Equal(t, 1, b.w.F.Count(`SELECT count(*) FROM switchboard.subscriptions WHERE sink_id = $1 AND webhook_ids = ARRAY[$2::bigint]`, sink, hook),
		"the subscription keeps its filter: it is never widened to every webhook")

	// The delivery's board link still opens for its owner, and only for it.
	var d host.Delivery
	b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("%s/deliveries/%d", path, delivery), nil).into(t, &d)
	require.Equal(t, delivery, d.ID)
	b.refused(t, http.StatusNotFound, "not_found", other, "GET", fmt.Sprintf("%s/deliveries/%d", path, delivery), nil)

	// Recorded with its author (REQ-5), beside the create.
	writes, err := store.ListWrites(b.w.Ctx, b.w.Pool, host.ObjectWebhook, hook)
	require.NoError(t, err)
	require.Len(t, writes, 2)
	require.Equal(t, []string{host.WriteWebhookCreate, host.WriteWebhookDelete}, []string{writes[0].Action, writes[1].Action})
	require.Equal(t, hostid.String(owner), writes[1].HumanID)
	require.Zero(t, writes[1].EndpointID)
	require.Equal(t, human(owner), writes[1].Owner)
	teamWrites, err := store.ListWrites(b.w.Ctx, b.w.Pool, host.ObjectWebhook, teamHook.ID)
	require.NoError(t, err)
	require.Equal(t, hostid.String(admin), teamWrites[len(teamWrites)-1].HumanID)
	require.Equal(t, team(tm), teamWrites[len(teamWrites)-1].Owner)
}

// attackExprs are issue 18 item 8's expressions: refused are those outside
// the checked subset of jq, the rest pass the check and fault when run.
func attackExprs() (refused, faulting []string) {
	chain := []string{`(.s // "ab") as $s | ($s + $s) as $a0`}
	for i := 1; i < 40; i++ {
		chain = append(chain, fmt.Sprintf(`($a%d + $a%d) as $a%d`, i-1, i-1, i))
	}
	return []string{`"x" * 1000000000`, `setpath([536870912]; 1)`, `.[536870912] = 1`, `[range(1e9)]`, `def f: f; f`},
		[]string{strings.Join(chain, " | ") + ` | $a39 | length > 0`, `(1e9) as $n | "x" * $n | length > 0`}
}

// Rules are a checked subset of jq: through the API an expression outside
// it is refused at save and in a dry run with invalid_argument naming the
// field, and nothing is saved; one inside it that would grow without end
// is saved, and a dry run answers with it as a fault.
func TestRuleExpressionsOutsideTheSubsetAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, tok := b.human(t)
	hook, rule, _ := b.webhook(t, tok)
	refused, faulting := attackExprs()
	for _, expr := range refused {
		e := b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules", hook),
			map[string]any{"rules": []map[string]any{
				{"name": "ok", "expr": "true", "action": map[string]any{"drop": true}},
				{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}},
			}})
		require.Equal(t, "rules[1].expr", e.Field, expr)
		require.Contains(t, e.Message, "not allowed in rules (rules are a checked subset of jq)", expr)
		e = b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules", hook),
			map[string]any{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}})
		require.Equal(t, "expr", e.Field, expr)
		e = b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "PUT", fmt.Sprintf("/api/v1/webhooks/%d/rules/%d", hook, rule),
			map[string]any{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}})
		require.Equal(t, "expr", e.Field, expr)
		e = b.refused(t, http.StatusBadRequest, "invalid_argument", tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules/test", hook),
			map[string]any{"rules": []map[string]any{{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}}}})
		require.Equal(t, "rules[0].expr", e.Field, expr)
	}
	var rules struct{ Rules []host.Rule }
	b.ok(t, http.StatusOK, tok, "GET", fmt.Sprintf("/api/v1/webhooks/%d/rules", hook), nil).into(t, &rules)
	require.Len(t, rules.Rules, 1, "nothing refused was saved")
	require.Equal(t, "true", rules.Rules[0].Expr)

	for _, expr := range faulting {
		var report host.TestReport
		r := b.ok(t, http.StatusOK, tok, "POST", fmt.Sprintf("/api/v1/webhooks/%d/rules/test", hook), map[string]any{
			"rules": []map[string]any{{"name": "grow", "expr": expr, "action": map[string]any{"drop": true}}},
		})
		r.into(t, &report)
		require.Len(t, report.Deliveries, 1, string(r.body))
		require.Equal(t, host.OutcomeUnrouted, report.Deliveries[0].Outcome, expr)
		require.Len(t, report.Deliveries[0].Faults, 1)
		require.Contains(t, report.Deliveries[0].Faults[0], "past the rules' limit", expr)
	}
}
