package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// The rules family (D5, in the default grant): thin over host.Webhooks
// with the endpoint's principal, so the host decides the grant, the owner
// scope (the endpoint's only), the accountable human's role, and checks
// every rule at save (REQ-8) exactly as the web UI and the operator API
// do; every write records the endpoint and its human.

// Rule tool names.
const (
	ToolSetWebhookRules   = "set_webhook_rules"
	ToolAddWebhookRule    = "add_webhook_rule"
	ToolUpdateWebhookRule = "update_webhook_rule"
	ToolTestWebhookRules  = "test_webhook_rules"
)

// rulesVerbs are the rules family's tools, in order.
var rulesVerbs = []verb{
	{ToolSetWebhookRules, addSetWebhookRules},
	{ToolAddWebhookRule, addAddWebhookRule},
	{ToolUpdateWebhookRule, addUpdateWebhookRule},
	{ToolTestWebhookRules, addTestWebhookRules},
	{ToolListWebhooks, addListWebhooks},
}

// RuleActionIn is what a matching rule does.
type RuleActionIn struct {
	Queue          int64  `json:"queue,omitempty" jsonschema:"a queue id to route a matching delivery to as a new todo; a queue of the webhook's owner scope or one that befriended it"`
	Drop           bool   `json:"drop,omitempty" jsonschema:"drop a matching delivery; not with queue"`
	Notify         string `json:"notify,omitempty" jsonschema:"the name of a sink of the webhook's owner scope to send a rule.notify; composes with queue and drop"`
	NotifySeverity string `json:"notify_severity,omitempty" jsonschema:"low, normal or high; defaults to normal"`
}

// RuleIn is a rule as the rules verbs take it.
type RuleIn struct {
	Name   string       `json:"name" jsonschema:"what the rule is for, 1 to 100 characters"`
	Expr   string       `json:"expr" jsonschema:"a jq expression run on the delivery's JSON payload, at most 4096 bytes; the rule matches when its first output is neither false nor null"`
	Action RuleActionIn `json:"action" jsonschema:"at least one of queue, drop and notify"`
}

func (r RuleIn) input() host.RuleInput {
	return host.RuleInput{Name: r.Name, Expr: r.Expr, Action: host.RuleAction{
		Queue: r.Action.Queue, Drop: r.Action.Drop, Notify: r.Action.Notify,
		NotifySeverity: notifytype.Severity(r.Action.NotifySeverity),
	}}
}

func inputs(rs []RuleIn) []host.RuleInput {
	if rs == nil {
		return nil
	}
	out := make([]host.RuleInput, len(rs))
	for i, r := range rs {
		out[i] = r.input()
	}
	return out
}

// SetWebhookRulesIn is set_webhook_rules' input.
type SetWebhookRulesIn struct {
	WebhookID int64    `json:"webhook_id" jsonschema:"a webhook of the endpoint's owner scope"`
	Rules     []RuleIn `json:"rules" jsonschema:"the whole ordered list (at most 50); replaces the saved one"`
}

// RulesOut is a webhook's rules.
type RulesOut struct {
	Rules []host.Rule `json:"rules"`
}

// AddWebhookRuleIn is add_webhook_rule's input.
type AddWebhookRuleIn struct {
	WebhookID int64  `json:"webhook_id" jsonschema:"a webhook of the endpoint's owner scope"`
	Rule      RuleIn `json:"rule" jsonschema:"appended at the end of the list"`
}

// RuleOut is one saved rule.
type RuleOut struct {
	Rule host.Rule `json:"rule"`
}

// UpdateWebhookRuleIn is update_webhook_rule's input.
type UpdateWebhookRuleIn struct {
	WebhookID int64  `json:"webhook_id" jsonschema:"a webhook of the endpoint's owner scope"`
	RuleID    int64  `json:"rule_id" jsonschema:"the rule to rewrite; it keeps its id and place"`
	Rule      RuleIn `json:"rule"`
}

// TestWebhookRulesIn is test_webhook_rules' input.
type TestWebhookRulesIn struct {
	WebhookID int64    `json:"webhook_id" jsonschema:"a webhook of the endpoint's owner scope"`
	Rules     []RuleIn `json:"rules,omitempty" jsonschema:"candidate rules to score; omit to score the saved ones"`
	Limit     int      `json:"limit,omitempty" jsonschema:"how many of the most recent stored deliveries to score; defaults to 50, at most 500"`
}

func addSetWebhookRules(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolSetWebhookRules,
		Title: "Replace a webhook's routing rules",
		Description: "Replace the ordered routing rules of a webhook. All rules run on each delivery; the first match with queue or drop decides routing, " +
			"and each sink named by a matching rule's notify gets one rule.notify. Refused with invalid_argument naming the rule when an expression " +
			"does not compile or notify names no sink of the webhook's owner scope; then nothing is saved." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, c *caller, in SetWebhookRulesIn) (RulesOut, error) {
		rules, err := s.d.Webhooks.SetRules(ctx, c.p, in.WebhookID, inputs(in.Rules))
		if err != nil {
			return RulesOut{}, err
		}
		return RulesOut{Rules: rules}, nil
	})
}

func addAddWebhookRule(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolAddWebhookRule,
		Title:       "Add a routing rule",
		Description: "Append one routing rule to a webhook's list, checked as set_webhook_rules checks each." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, func(ctx context.Context, c *caller, in AddWebhookRuleIn) (RuleOut, error) {
		r, err := s.d.Webhooks.AddRule(ctx, c.p, in.WebhookID, in.Rule.input())
		if err != nil {
			return RuleOut{}, rulePath(err)
		}
		return RuleOut{Rule: r}, nil
	})
}

func addUpdateWebhookRule(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:        ToolUpdateWebhookRule,
		Title:       "Change a routing rule",
		Description: "Rewrite one routing rule of a webhook in place, checked as set_webhook_rules checks each." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, func(ctx context.Context, c *caller, in UpdateWebhookRuleIn) (RuleOut, error) {
		r, err := s.d.Webhooks.UpdateRule(ctx, c.p, in.WebhookID, in.RuleID, in.Rule.input())
		if err != nil {
			return RuleOut{}, rulePath(err)
		}
		return RuleOut{Rule: r}, nil
	})
}

func addTestWebhookRules(srv *mcp.Server, s *surface) {
	addTool(srv, s, &mcp.Tool{
		Name:  ToolTestWebhookRules,
		Title: "Dry-run routing rules",
		Description: "Score candidate rules (or the saved ones) against the webhook's stored deliveries: which would be routed to which queue, " +
			"dropped or quarantined, and which would notify which sink. Sends nothing and saves nothing." + bodyLimitNote,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, c *caller, in TestWebhookRulesIn) (host.TestReport, error) {
		return s.d.Webhooks.TestRules(ctx, c.p, in.WebhookID, inputs(in.Rules), in.Limit)
	})
}

// rulePath names a refused field of the one rule add_webhook_rule and
// update_webhook_rule take by its path in their arguments
// ("rule.action.notify"); the host names it within the rule.
func rulePath(err error) error {
	e, ok := notifytype.AsError(err)
	if !ok || e.Code != notifytype.CodeInvalidArgument {
		return err
	}
	switch head, _, _ := strings.Cut(e.Field, "."); head {
	case "name", "expr", "action":
		return &notifytype.Error{Code: e.Code, Field: "rule." + e.Field, Message: e.Message}
	}
	return err
}
