package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/notifytype"
)

// toolSchemas lists every tool of an endpoint holding every grant, with its
// input and output schemas as a client reads them.
func toolSchemas(t *testing.T, w *world) map[string][2]*jsonschema.Schema {
	t.Helper()
	human, scope := w.person()
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	res, err := w.connect(t, cred).ListTools(context.Background(), nil)
	require.NoError(t, err)
	out := map[string][2]*jsonschema.Schema{}
	for _, tool := range res.Tools {
		var pair [2]*jsonschema.Schema
		for i, raw := range []any{tool.InputSchema, tool.OutputSchema} {
			b, err := json.Marshal(raw)
			require.NoError(t, err)
			pair[i] = new(jsonschema.Schema)
			require.NoError(t, json.Unmarshal(b, pair[i]), tool.Name)
		}
		out[tool.Name] = pair
	}
	return out
}

// walkSchema calls fn on s and every subschema, with its path.
func walkSchema(path string, s *jsonschema.Schema, fn func(string, *jsonschema.Schema)) {
	if s == nil {
		return
	}
	fn(path, s)
	for k, p := range s.Properties {
		walkSchema(path+"."+k, p, fn)
	}
	walkSchema(path+"[]", s.Items, fn)
	walkSchema(path+"{}", s.AdditionalProperties, fn)
}

// Issue 19 item 13: the schemas declared every slice and pointer nullable
// (type ["null", ...]), though nothing is ever sent as null and a null
// argument is refused.
func TestSchemasDeclareNoNull(t *testing.T) {
	t.Parallel()
	schemas := toolSchemas(t, rulesWorld(t))
	require.NotEmpty(t, schemas)
	for name, pair := range schemas {
		for i, s := range pair {
			require.NotNil(t, s, "%s declares both schemas", name)
			walkSchema(name+[]string{" input", " output"}[i], s, func(path string, s *jsonschema.Schema) {
				require.NotEqual(t, "null", s.Type, path)
				require.NotContains(t, s.Types, "null", path)
			})
		}
	}
}

// Issue 19 item 14: allowed values as enum, limits as minimum, maximum,
// minLength, maxLength, minItems and maxItems.
func TestSchemasDeclareAllowedValuesAndLimits(t *testing.T) {
	t.Parallel()
	schemas := toolSchemas(t, rulesWorld(t))
	prop := func(tool string, out bool, path ...string) *jsonschema.Schema {
		t.Helper()
		s := schemas[tool][0]
		if out {
			s = schemas[tool][1]
		}
		for _, p := range path {
			if p == "[]" {
				s = s.Items
			} else {
				s = s.Properties[p]
			}
			require.NotNil(t, s, "%s %v", tool, path)
		}
		return s
	}
	severities := []any{"low", "normal", "high"}
	events := make([]any, len(host.EventTypes))
	for i, e := range host.EventTypes {
		events[i] = string(e)
	}
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	cfg := engine.Config{}.WithDefaults()

	require.Equal(t, severities, prop(mcpserver.ToolSetSinkSubscriptions, false, "subscriptions", "[]", "min_severity").Enum)
	require.Equal(t, events, prop(mcpserver.ToolSetSinkSubscriptions, false, "subscriptions", "[]", "event_types", "[]").Enum)
	require.Equal(t, i(1), prop(mcpserver.ToolSetSinkSubscriptions, false, "subscriptions", "[]", "event_types").MinItems)
	require.Equal(t, events, prop(mcpserver.ToolSetSinkSubscriptions, true, "subscriptions", "[]", "event_types", "[]").Enum)
	require.Equal(t, []any{"gotify", "apprise"}, prop(mcpserver.ToolSetSink, false, "kind").Enum)
	require.Equal(t, []any{"gotify", "apprise"}, prop(mcpserver.ToolListSinks, true, "sinks", "[]", "kind").Enum)
	require.Equal(t, f(float64(cfg.BudgetPerHourMin)), prop(mcpserver.ToolSetSink, false, "budget_per_hour").Minimum)
	require.Equal(t, f(float64(cfg.BudgetPerHourMax)), prop(mcpserver.ToolSetSink, false, "budget_per_hour").Maximum)
	require.Equal(t, f(float64(cfg.BudgetBurstMax)), prop(mcpserver.ToolSetSink, false, "budget_burst").Maximum)
	require.Equal(t, i(engine.NameMaxLen), prop(mcpserver.ToolSetSink, false, "name").MaxLength)
	require.Equal(t, severities, prop(mcpserver.ToolNotifyOwner, false, "severity").Enum)
	require.Equal(t, i(pages.AgentTitleMaxLen), prop(mcpserver.ToolNotifyOwner, false, "title").MaxLength)
	require.Equal(t, i(host.AttemptSummaryMaxLen), prop(mcpserver.ToolComplete, false, "summary").MaxLength)
	require.Equal(t, i(host.RulesMax), prop(mcpserver.ToolSetWebhookRules, false, "rules").MaxItems)
	require.Equal(t, i(host.RuleNameMaxLen), prop(mcpserver.ToolSetWebhookRules, false, "rules", "[]", "name").MaxLength)
	require.Equal(t, severities, prop(mcpserver.ToolAddWebhookRule, false, "rule", "action", "notify_severity").Enum)
	require.Equal(t, f(host.DeliveriesListMax), prop(mcpserver.ToolTestWebhookRules, false, "limit").Maximum)
	require.NotEmpty(t, prop(mcpserver.ToolTestSink, true, "error_class").Enum)
	require.Equal(t, f(60), prop(mcpserver.ToolSetDigest, false, "quiet_threshold_seconds").Minimum)
}

// Issue 19 item 13: a required list given as null cleared everything.
func TestNullForARequiredListIsRefused(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	sink := w.sink(human, scope, "https://push.example.net", host.EventTodoDeadLettered)
	hook, _, err := w.deps.Webhooks.Create(w.Ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: scope, Name: "forge"})
	require.NoError(t, err)
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	cs := w.connect(t, cred)
	succeeds[mcpserver.RulesOut](t, cs, mcpserver.ToolSetWebhookRules, map[string]any{
		"webhook_id": hook.ID, "rules": []any{map[string]any{"name": "all", "expr": "true", "action": map[string]any{"drop": true}}},
	})
	subs := func() int {
		return w.count(t, `SELECT count(*) FROM switchboard.subscriptions WHERE sink_id = $1`, sink)
	}
	rules := func() int { return w.count(t, `SELECT count(*) FROM webhook_rules WHERE webhook_id = $1`, hook.ID) }
	require.Equal(t, 1, subs())
	require.Equal(t, 1, rules())

	e := refused(t, cs, mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": nil})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "subscriptions", e.Field)
	require.Contains(t, e.Message, "may not be null")
	e = refused(t, cs, mcpserver.ToolSetWebhookRules, map[string]any{"webhook_id": hook.ID, "rules": nil})
	require.Equal(t, notifytype.CodeInvalidArgument, e.Code)
	require.Equal(t, "rules", e.Field)
	e = refused(t, cs, mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{
		map[string]any{"event_types": []any{"digest"}, "queues": nil}}})
	require.Equal(t, "subscriptions[0].queues", e.Field, "an optional list is omitted, not null")
	require.Equal(t, 1, subs(), "nothing changed")
	require.Equal(t, 1, rules(), "nothing changed")

	// An empty list keeps its documented meaning: it clears.
	cleared := succeeds[mcpserver.SetSinkSubscriptionsOut](t, cs, mcpserver.ToolSetSinkSubscriptions, map[string]any{"sink_id": sink, "subscriptions": []any{}})
	require.Empty(t, cleared.Subscriptions)
	require.Zero(t, subs())
	succeeds[mcpserver.RulesOut](t, cs, mcpserver.ToolSetWebhookRules, map[string]any{"webhook_id": hook.ID, "rules": []any{}})
	require.Zero(t, rules())
}

// Issue 19 item 13: 1.0 and 1e3 for an integer were refused as "out of
// range".
func TestWholeNumbersAreIntegers(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	human, scope := w.person()
	queue := w.F.Queue(scope, "forge")
	w.F.Todo(hosttest.TodoOpts{Queue: queue, Title: "build 812"})
	sink := w.sink(human, scope, "https://push.example.net")
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	cs := w.connect(t, cred)

	claimed := succeeds[mcpserver.ClaimOut](t, cs, mcpserver.ToolClaim, map[string]any{"queue_id": json.Number(strconv.FormatInt(queue, 10) + ".0")})
	require.True(t, claimed.Claimed)
	exp := json.Number(strconv.FormatFloat(float64(claimed.Todo.ID), 'e', -1, 64)) // 1.234e+03
	require.Contains(t, string(exp), "e")
	beat := succeeds[mcpserver.TodoOut](t, cs, mcpserver.ToolHeartbeat, map[string]any{"todo_id": exp})
	require.Equal(t, claimed.Todo.ID, beat.ID)
	changed := succeeds[mcpserver.SinkOut](t, cs, mcpserver.ToolSetSink, map[string]any{
		"id": json.Number(fmt.Sprintf("%d.000", sink)), "budget_per_hour": json.Number("4e1"), "budget_burst": json.Number("1e0"),
	})
	require.Equal(t, 40, changed.BudgetPerHour)
	require.Equal(t, 1, changed.BudgetBurst)

	for _, tc := range []struct {
		n   string
		msg string
	}{
		{"1.5", "whole number"},
		{"1e-1", "whole number"},
		{"9223372036854775808", "out of range"},
		{"1e19", "out of range"},
		{"-9.3e18", "out of range"},
	} {
		e := refused(t, cs, mcpserver.ToolHeartbeat, map[string]any{"todo_id": json.Number(tc.n)})
		require.Equal(t, notifytype.CodeInvalidArgument, e.Code, tc.n)
		require.Equal(t, "todo_id", e.Field, tc.n)
		require.Contains(t, e.Message, tc.msg, tc.n)
	}
	e := refused(t, cs, mcpserver.ToolSetSink, map[string]any{"id": sink, "budget_per_hour": json.Number("1e3")})
	require.Equal(t, "budget_per_hour", e.Field, "a whole number past the bound is refused by the bound")
	require.Contains(t, e.Message, "from 1 to 120")
}

// Issue 19 item 14: the verbs whose arguments can exceed the 16 KiB body
// limit name it in their descriptions.
func TestBodyLimitNamedWhereArgumentsCanExceedIt(t *testing.T) {
	t.Parallel()
	w := rulesWorld(t)
	human, scope := w.person()
	_, cred := w.vend(t, human, scope, notifytype.Grants...)
	res, err := w.connect(t, cred).ListTools(context.Background(), nil)
	require.NoError(t, err)
	named := map[string]bool{}
	for _, tool := range res.Tools {
		named[tool.Name] = strings.Contains(tool.Description, "16 KiB")
	}
	for _, name := range []string{mcpserver.ToolSetSink, mcpserver.ToolSetSinkSubscriptions, mcpserver.ToolSetWebhookRules,
		mcpserver.ToolAddWebhookRule, mcpserver.ToolUpdateWebhookRule, mcpserver.ToolTestWebhookRules,
		mcpserver.ToolComplete, mcpserver.ToolFail, mcpserver.ToolSetDigest} {
		require.True(t, named[name], name)
	}
	for _, name := range []string{mcpserver.ToolListSinks, mcpserver.ToolClaim, mcpserver.ToolHeartbeat, mcpserver.ToolDeleteSink} {
		require.False(t, named[name], "%s takes a few ids only", name)
	}
}
