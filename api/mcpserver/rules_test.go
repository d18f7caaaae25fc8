package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

// rulesWorld is the MCP world with the host's webhooks wired in.
func rulesWorld(t *testing.T) *world {
	t.Helper()
	var w *world
	w = newWorld(t, func(d *httpx.Deps) {
		d.Webhooks = host.NewWebhooks(host.WebhooksConfig{Pool: d.Pool, Emitter: d.Engine, SecretKey: make([]byte, 32), Clock: d.Clock})
	})
	return w
}

func TestRuleVerbsWithTheDefaultGrant(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	hook, secret, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(human), host.WebhookInput{
		Owner: scope, Name: "forge", TrustedSenders: []string{"octocat", "dependabot"},
	})
	require.NoError(t, err)
	w.F.Sink(storetest.SinkOpts{Owner: scope, Name: "phone"})
	queue := w.F.Queue(scope, "inbox")
	endpoint, cred := w.vend(t, human, scope) // the default grant: todos and rules
	cs := w.connect(t, cred)

	set := succeeds[mcpserver.RulesOut](t, cs, mcpserver.ToolSetWebhookRules, map[string]any{
		"webhook_id": hook.ID,
		"rules": []map[string]any{
			{"name": "bots", "expr": `.sender.login == "dependabot"`, "action": map[string]any{"drop": true, "notify": "phone"}},
		},
	})
	require.Len(t, set.Rules, 1)
	require.Equal(t, endpoint, set.Rules[0].UpdatedByEndpointID, "the write records the endpoint")
	require.Equal(t, human, set.Rules[0].UpdatedByHumanID, "and its human")

	added := succeeds[mcpserver.RuleOut](t, cs, mcpserver.ToolAddWebhookRule, map[string]any{
		"webhook_id": hook.ID,
		"rule":       map[string]any{"name": "inbox", "expr": `.issue != null`, "action": map[string]any{"queue": queue}},
	})
	require.Equal(t, 2, added.Rule.Position)
	updated := succeeds[mcpserver.RuleOut](t, cs, mcpserver.ToolUpdateWebhookRule, map[string]any{
		"webhook_id": hook.ID, "rule_id": added.Rule.ID,
		"rule": map[string]any{"name": "inbox", "expr": `.issue.number > 0`, "action": map[string]any{"queue": queue, "notify": "phone", "notify_severity": "high"}},
	})
	require.Equal(t, added.Rule.ID, updated.Rule.ID)
	require.Equal(t, notifytype.SeverityHigh, updated.Rule.Action.NotifySeverity)

	body := `{"sender":{"login":"dependabot"},"issue":{"number":3,"title":"bump"}}`
	_, err = w.deps.Webhooks.Receive(w.Ctx, hook.ID, []byte(body), host.Sign(secret, host.NewMessageID(), w.Clock.Now(), []byte(body)))
	require.NoError(t, err)
	outbox := w.count(t, `SELECT count(*) FROM switchboard.outbox`)

	// Scenario: Dry run sends nothing
	report := succeeds[host.TestReport](t, cs, mcpserver.ToolTestWebhookRules, map[string]any{
		"webhook_id": hook.ID,
		"rules":      []map[string]any{{"name": "all", "expr": `true`, "action": map[string]any{"notify": "phone"}}},
	})
	require.Equal(t, 1, report.Scored)
	require.Equal(t, []host.NotifyRequest{{Sink: "phone", Rule: "all", Severity: notifytype.SeverityNormal}}, report.Deliveries[0].WouldNotify)
	require.Equal(t, outbox, w.count(t, `SELECT count(*) FROM switchboard.outbox`), "no outbox row is written")
	require.Zero(t, w.count(t, `SELECT count(*) FROM switchboard.delivery_records`), "nothing is sent")
}

func TestRuleVerbsRefuseAnotherOwnersSink(t *testing.T) {
	t.Parallel()
	// Scenario: Another owner's sink name
	w := rulesWorld(t)
	human, scope := w.person()
	other, otherScope := w.person()
	hook, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(human), host.WebhookInput{Owner: scope, Name: "forge"})
	require.NoError(t, err)
	theirs, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(other), host.WebhookInput{Owner: otherScope, Name: "theirs"})
	require.NoError(t, err)
	w.F.Sink(storetest.SinkOpts{Owner: otherScope, Name: "their-phone"})
	_, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)

	e := refused(t, cs, mcpserver.ToolAddWebhookRule, map[string]any{
		"webhook_id": hook.ID,
		"rule":       map[string]any{"name": "page them", "expr": `true`, "action": map[string]any{"notify": "their-phone"}},
	})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "action.notify", e.Field)
	require.Contains(t, e.Message, `"page them"`)
	e = refused(t, cs, mcpserver.ToolSetWebhookRules, map[string]any{
		"webhook_id": hook.ID,
		"rules":      []map[string]any{{"name": "broken", "expr": `.a |`, "action": map[string]any{"drop": true}}},
	})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "rules[0].expr", e.Field)
	require.Zero(t, w.count(t, `SELECT count(*) FROM webhook_rules`), "nothing is saved")

	e = refused(t, cs, mcpserver.ToolSetWebhookRules, map[string]any{"webhook_id": theirs.ID, "rules": []map[string]any{}})
	require.Equal(t, notifytype.CodeNotFound, e.Code, "another owner's webhook is not found")
}
