package mcpserver_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Issue 19 item 14: a refusal of a nested argument names its path in the
// arguments, whether the schema check, the engine or the host refuses it.
func TestNestedArgumentErrorsNameTheirPath(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	_, otherScope := w.person()
	sink := w.sink(human, scope, "https://push.example.net", engine.EventDigest)
	queue := w.F.Queue(scope, "forge")
	theirQueue := w.F.Queue(otherScope, "theirs")
	hook, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: scope, Name: "forge"})
	require.NoError(t, err)
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	cs := w.connect(t, cred)
	saved := succeeds[mcpserver.RuleOut](t, cs, mcpserver.ToolAddWebhookRule, map[string]any{
		"webhook_id": hook.ID, "rule": map[string]any{"name": "inbox", "expr": "true", "action": map[string]any{"queue": queue}},
	})
	good := map[string]any{"event_types": []any{"digest"}, "queues": []any{queue}}
	rule := func(action map[string]any) map[string]any {
		return map[string]any{"name": "r", "expr": "true", "action": action}
	}
	subs := w.count(t, `SELECT count(*) FROM switchboard.subscriptions`)
	rules := w.TableJSON("webhook_rules")

	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{good,
			map[string]any{"event_types": []any{"digest"}, "min_severity": "urgent"}}}, "subscriptions[1].min_severity"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{good,
			map[string]any{"event_types": []any{"digest", "todo.done"}}}}, "subscriptions[1].event_types[1]"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{good,
			map[string]any{"event_types": []any{}}}}, "subscriptions[1].event_types"},
		// The engine's refusals: another scope's queue, a missing webhook.
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{good, good,
			map[string]any{"event_types": []any{"digest"}, "queues": []any{queue, theirQueue}}}}, "subscriptions[2].queues"},
		{mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{
			map[string]any{"event_types": []any{"digest"}, "webhooks": []any{1 << 40}}}}, "subscriptions[0].webhooks"},
		// The host's refusals, and the schema's.
		{mcpserver.ToolSetWebhookRules, map[string]any{"webhook_id": hook.ID, "rules": []any{
			rule(map[string]any{"queue": theirQueue})}}, "rules[0].action.queue"},
		{mcpserver.ToolSetWebhookRules, map[string]any{"webhook_id": hook.ID, "rules": []any{
			rule(map[string]any{"drop": true}), rule(map[string]any{"notify": "phone", "notify_severity": "loud"})}}, "rules[1].action.notify_severity"},
		{mcpserver.ToolAddWebhookRule, map[string]any{"webhook_id": hook.ID, "rule": rule(map[string]any{"queue": theirQueue})}, "rule.action.queue"},
		{mcpserver.ToolAddWebhookRule, map[string]any{"webhook_id": hook.ID, "rule": rule(map[string]any{"queue": -3})}, "rule.action.queue"},
		{mcpserver.ToolAddWebhookRule, map[string]any{"webhook_id": hook.ID, "rule": rule(map[string]any{})}, "rule.action"},
		{mcpserver.ToolUpdateWebhookRule, map[string]any{"webhook_id": hook.ID, "rule_id": saved.Rule.ID,
			"rule": map[string]any{"name": "inbox", "expr": ".a |", "action": map[string]any{"drop": true}}}, "rule.expr"},
		{mcpserver.ToolTestWebhookRules, map[string]any{"webhook_id": hook.ID, "rules": []any{
			rule(map[string]any{"drop": true}), rule(map[string]any{"notify": "nobody"})}}, "rules[1].action.notify"},
	} {
		e := refused(t, cs, tc.tool, tc.args)
		require.Equal(t, notifytype.CodeInvalidArgument, e.Code, "%s %v", tc.tool, tc.args)
		require.Equal(t, tc.field, e.Field, "%s %v: %s", tc.tool, tc.args, e.Message)
	}
	require.Equal(t, subs, w.count(t, `SELECT count(*) FROM switchboard.subscriptions`), "nothing changed")
	require.Equal(t, rules, w.TableJSON("webhook_rules"), "nothing changed")
}

// Issue 19 item 14: a connection an agent names that does not exist, is
// another scope's or is of another kind is invalid_argument on the field
// that named it, one refusal for the three (no id of another scope is
// revealed); it was forbidden, the human surfaces' answer (REQ-2).
func TestWrongConnectionIsAnInvalidArgument(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	other, otherScope := w.person()
	conn := func(p int64, owner notifytype.OwnerScope, kind, name string) int64 {
		t.Helper()
		c, err := w.eng.CreateConnection(w.Ctx, engine.HumanPrincipal(hostid.String(p)), engine.ConnectionInput{
			Owner: owner, Kind: kind, Name: name, BaseURL: "https://push.example.net", Secret: notifytype.NewSecret(gotifyToken),
		})
		require.NoError(t, err)
		return c.ID
	}
	mine := conn(human, scope, engine.KindGotify, "mine")
	cairn := conn(human, scope, engine.KindCairn, "artifacts")
	theirs := conn(other, otherScope, engine.KindGotify, "theirs")
	theirCairn := conn(other, otherScope, engine.KindCairn, "their-artifacts")
	_, cred := w.vend(t, human, scope, notifytype.GrantNotifications)
	cs := w.connect(t, cred)
	sink := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{"name": "phone", "kind": "gotify", "connection_id": mine})
	sinks, digests := w.TableJSON("sinks"), w.TableJSON("digests")

	var messages []string
	for _, id := range []int64{1 << 40, theirs, cairn} {
		for _, args := range []map[string]any{
			{"name": "pager", "kind": "gotify", "connection_id": id},
			{"id": sink.ID, "connection_id": id},
		} {
			e := refused(t, cs, mcpserver.ToolSetSink, args)
			require.Equal(t, notifytype.CodeInvalidArgument, e.Code, "%v", args)
			require.Equal(t, "connection_id", e.Field, "%v", args)
			require.Contains(t, e.Message, mcpserver.ToolListConnections)
			messages = append(messages, e.Message)
		}
	}
	for _, id := range []int64{1 << 40, theirCairn, mine} {
		e := refused(t, cs, mcpserver.ToolSetDigest, map[string]any{"name": "daily", "schedule": "daily 09:00", "cairn_connection_id": id})
		require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
		require.Equal(t, "cairn_connection_id", e.Field)
	}
	for _, m := range messages {
		require.Equal(t, messages[0], m, "missing, another scope's and another kind's read alike")
	}
	require.Equal(t, sinks, w.TableJSON("sinks"), "nothing changed")
	require.Equal(t, digests, w.TableJSON("digests"), "nothing changed")
}
