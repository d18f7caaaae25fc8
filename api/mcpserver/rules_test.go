package mcpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
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
	hook, secret, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{
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
	hook, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: scope, Name: "forge"})
	require.NoError(t, err)
	theirs, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(other)), host.WebhookInput{Owner: otherScope, Name: "theirs"})
	require.NoError(t, err)
	w.F.Sink(storetest.SinkOpts{Owner: otherScope, Name: "their-phone"})
	_, cred := w.vend(t, human, scope)
	cs := w.connect(t, cred)

	e := refused(t, cs, mcpserver.ToolAddWebhookRule, map[string]any{
		"webhook_id": hook.ID,
		"rule":       map[string]any{"name": "page them", "expr": `true`, "action": map[string]any{"notify": "their-phone"}},
	})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "rule.action.notify", e.Field, "the field's path in the arguments")
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

// Rules are a checked subset of jq for an agent with the default grant too:
// issue 18 item 8's expressions outside it are refused by every rule verb
// with invalid_argument naming the field, and nothing is saved; the ones
// inside it that would grow without end fault in a dry run, which answers.
func TestRuleVerbsRefuseExpressionsOutsideTheSubset(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	hook, secret, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{
		Owner: scope, Name: "forge", TrustedSenders: []string{"octocat"},
	})
	require.NoError(t, err)
	body := `{"sender":{"login":"octocat"},"s":"ab"}`
	_, err = w.deps.Webhooks.Receive(w.Ctx, hook.ID, []byte(body), host.Sign(secret, host.NewMessageID(), w.Clock.Now(), []byte(body)))
	require.NoError(t, err)
	_, cred := w.vend(t, human, scope) // the default grant: todos and rules
	cs := w.connect(t, cred)
	set := succeeds[mcpserver.RulesOut](t, cs, mcpserver.ToolSetWebhookRules, map[string]any{
		"webhook_id": hook.ID,
		"rules":      []map[string]any{{"name": "all", "expr": `true`, "action": map[string]any{"drop": true}}},
	})

	chain := []string{`($s + $s) as $a0`}
	for i := 1; i < 40; i++ {
		chain = append(chain, fmt.Sprintf(`($a%d + $a%d) as $a%d`, i-1, i-1, i))
	}
	rule := func(expr string) map[string]any {
		return map[string]any{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}}
	}
	for _, expr := range []string{`"x" * 1000000000`, `setpath([536870912]; 1)`, `.[536870912] = 1`, `[range(1e9)]`, `def f: f; f`} {
		for _, c := range []struct {
			tool, field string
			args        map[string]any
		}{
			{mcpserver.ToolSetWebhookRules, "rules[0].expr", map[string]any{"webhook_id": hook.ID, "rules": []map[string]any{rule(expr)}}},
			{mcpserver.ToolAddWebhookRule, "rule.expr", map[string]any{"webhook_id": hook.ID, "rule": rule(expr)}},
			{mcpserver.ToolUpdateWebhookRule, "rule.expr", map[string]any{"webhook_id": hook.ID, "rule_id": set.Rules[0].ID, "rule": rule(expr)}},
			{mcpserver.ToolTestWebhookRules, "rules[0].expr", map[string]any{"webhook_id": hook.ID, "rules": []map[string]any{rule(expr)}}},
		} {
			e := refused(t, cs, c.tool, c.args)
			require.Equal(t, notifytype.CodeInvalidArgument, e.Code, "%s %s", c.tool, expr)
			require.Equal(t, c.field, e.Field, "%s %s", c.tool, expr)
			require.Contains(t, e.Message, "checked subset of jq", "%s %s", c.tool, expr)
		}
	}
	rules, err := w.deps.Webhooks.Rules(w.Ctx, engine.HumanPrincipal(hostid.String(human)), hook.ID)
	require.NoError(t, err)
	require.Len(t, rules, 1, "nothing refused was saved")
	require.Equal(t, set.Rules[0].ID, rules[0].ID)
	require.Equal(t, "true", rules[0].Expr)

	for _, expr := range []string{
		`.s as $s | ` + strings.Join(chain, " | ") + ` | $a39 | length > 0`,
		`(1e9) as $n | "x" * $n | length > 0`,
	} {
		report := succeeds[host.TestReport](t, cs, mcpserver.ToolTestWebhookRules, map[string]any{
			"webhook_id": hook.ID, "rules": []map[string]any{rule(expr)},
		})
		require.Len(t, report.Deliveries, 1)
		require.Equal(t, host.OutcomeUnrouted, report.Deliveries[0].Outcome)
		require.Len(t, report.Deliveries[0].Faults, 1)
		require.Contains(t, report.Deliveries[0].Faults[0], "past the rules' limit")
	}
}
