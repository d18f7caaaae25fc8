package mcpserver

import (
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/pages"
	"github.com/switchboard/notify/host"
)

// The allowed values and limits each tool's types declare (schema.go):
// the ones the engine and the host enforce, so a client can see them in
// tools/list and checkArgument refuses a value outside them naming its
// path.

func (SetSinkIn) refineSchema(s *jsonschema.Schema, l limits) {
	length(prop(s, "name"), 1, engine.NameMaxLen)
	prop(s, "kind").Enum = sinkKindEnum
	bounded(prop(s, "budget_per_hour"), float64(l.budgetPerHourMin), float64(l.budgetPerHourMax))
	bounded(prop(s, "budget_burst"), float64(l.budgetBurstMin), float64(l.budgetBurstMax))
}

func (SinkOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "kind").Enum = sinkKindEnum
}

func (TestSinkOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "error_class").Enum = classEnum
}

func (SubscriptionIn) refineSchema(s *jsonschema.Schema, l limits) {
	types := prop(s, "event_types")
	types.MinItems = ptr(1)
	types.Items.Enum = l.eventTypes
	prop(s, "min_severity").Enum = severityEnum
}

func (SubscriptionOut) refineSchema(s *jsonschema.Schema, l limits) {
	prop(s, "event_types").Items.Enum = l.eventTypes
	prop(s, "min_severity").Enum = severityEnum
}

func (RuleActionIn) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "queue").Minimum = ptr(0.0)
	length(prop(s, "notify"), 0, engine.NameMaxLen)
	prop(s, "notify_severity").Enum = severityEnum
}

func (RuleIn) refineSchema(s *jsonschema.Schema, _ limits) {
	length(prop(s, "name"), 1, host.RuleNameMaxLen)
	prop(s, "expr").MinLength = ptr(1)
}

func (SetWebhookRulesIn) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "rules").MaxItems = ptr(host.RulesMax)
}

func (TestWebhookRulesIn) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "rules").MaxItems = ptr(host.RulesMax)
	bounded(prop(s, "limit"), 0, host.DeliveriesListMax)
}

func (RulesOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "rules.action.notify_severity").Enum = severityEnum
}

func (RuleOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "rule.action.notify_severity").Enum = severityEnum
}

func (NotifyOwnerIn) refineSchema(s *jsonschema.Schema, _ limits) {
	length(prop(s, "title"), 1, pages.AgentTitleMaxLen)
	prop(s, "severity").Enum = severityEnum
}

func (ReportIn) refineSchema(s *jsonschema.Schema, _ limits) {
	length(prop(s, "summary"), 0, host.AttemptSummaryMaxLen)
	length(prop(s, "artifact_handle"), 0, host.ArtifactHandleMaxLen)
}

func (TodoOut) refineSchema(s *jsonschema.Schema, _ limits) {
	prop(s, "state").Enum = []any{string(host.TodoPending), string(host.TodoClaimed), string(host.TodoDone), string(host.TodoDead)}
}

func (SetDigestIn) refineSchema(s *jsonschema.Schema, _ limits) {
	length(prop(s, "name"), 1, engine.NameMaxLen)
	bounded(prop(s, "quiet_threshold_seconds"), digests.QuietThresholdMin.Seconds(), digests.QuietThresholdMax.Seconds())
}
