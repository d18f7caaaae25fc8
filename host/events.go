package host

import (
	"strconv"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// The reference host's event types (REQ-6's table), which it declares
// (Events). The engine declares the other two the product uses,
// engine.EventAgentNotify and engine.EventDigest.
const (
	EventTodoDeadLettered    notifytype.EventType = "todo.dead_lettered"
	EventRelayExhausted      notifytype.EventType = "relay.exhausted"
	EventDeliveryQuarantined notifytype.EventType = "delivery.quarantined"
	EventRuleNotify          notifytype.EventType = "rule.notify"
)

// EventTypes lists the reference product's event types in the spec's
// order: the host's four, then the engine's own agent.notify and digest.
var EventTypes = []notifytype.EventType{
	EventTodoDeadLettered, EventRelayExhausted, EventDeliveryQuarantined,
	EventRuleNotify, engine.EventAgentNotify, engine.EventDigest,
}

// KindOf is the declaration of one of the reference product's event types
// (Events, then the engine's own, engine.OwnEvents): its words, label and
// severity, for what shows them without an engine; false for any other.
func KindOf(t notifytype.EventType) (engine.EventKind, bool) {
	for _, k := range append(Events(), engine.OwnEvents()...) {
		if k.Type == t {
			return k, true
		}
	}
	return engine.EventKind{}, false
}

// Events are the reference host's event types, as the engine needs them
// declared (engine.Config.Events), in the spec's order: todo.dead_lettered
// and relay.exhausted (keyed by the todo's dead letter, DeadLetterKey),
// delivery.quarantined (one per webhook while its 10-minute window is
// open, QuarantineSubject) and rule.notify (one per rule and subject,
// RuleSubject). Their messages are the host's wording (Draft).
// digest and agent.notify are the engine's own (engine/digests and
// engine/pages emit them).
func Events() []engine.EventKind {
	kind := func(t notifytype.EventType, words string, sev notifytype.Severity, help string, dedup engine.Dedup) engine.EventKind {
		return engine.EventKind{
			Type: t, Words: words, Label: CoalescedLabel(t), Help: help,
			Severity: sev, Dedup: dedup, Message: hostMessage,
		}
	}
	deadLetter := engine.Dedup{By: engine.DedupOccurrence, KeySpace: "todo"}
	relay := kind(EventRelayExhausted, "A relay ran out of attempts", notifytype.SeverityHigh,
		"a relay todo (a reply sent back to its source) ran out of attempts; it replaces the dead-letter message for that todo", deadLetter)
	relay.AlsoMatches = []notifytype.EventType{EventTodoDeadLettered}
	relay.Replaces = EventTodoDeadLettered
	return []engine.EventKind{
		kind(EventTodoDeadLettered, "A todo dead-lettered", notifytype.SeverityHigh,
			"a todo failed for good: its last attempt failed or its lease ran out, its endpoint was revoked, or it was interrupted", deadLetter),
		relay,
		kind(EventDeliveryQuarantined, "A webhook delivery was quarantined", notifytype.SeverityNormal,
			"a webhook received a delivery from a sender it does not trust; a storm of them is one message",
			engine.Dedup{By: engine.DedupSubject, Window: engine.QuarantineWindowDefault, KeySpace: "webhook"}),
		kind(EventRuleNotify, "A routing rule matched a webhook delivery", notifytype.SeverityNormal,
			"a routing rule that names this sink matched a delivery",
			engine.Dedup{By: engine.DedupSubject, KeySpace: "rule"}),
	}
}

// hostMessage words a row of the host's types (Draft).
func hostMessage(m engine.EventMessage) engine.Draft { return Draft(m.Content, m.Type) }

// Links are the host's links for the messages the engine words itself:
// the coalesced message opens the board's notifications page, a digest its
// page on the board, a todo (a digest's dead letter, an agent's page
// about it) its page on the board.
func Links() engine.Links {
	return engine.Links{
		Coalesced: func(notifytype.OwnerScope) string { return CoalescedLinkPath },
		Digest: func(_ notifytype.OwnerScope, id int64) string {
			return "/board/digests/" + strconv.FormatInt(id, 10)
		},
		Item: func(_ notifytype.OwnerScope, kind engine.Resource, id int64) string {
			if kind != engine.ResourceTodo {
				return ""
			}
			return "/board/todos/" + strconv.FormatInt(id, 10)
		},
		Text: BoardLinkText,
	}
}

// DeadLetterKey is the occurrence key of a todo's n-th dead letter
// (todo.dead_lettered and relay.exhausted, D7): "<todo>:<n>", so the
// outbox's key is "todo:<todo>:<n>". It is "" (refused by Emit) unless
// both are positive.
func DeadLetterKey(todoID int64, deadLetterCount int) string {
	if todoID <= 0 || deadLetterCount <= 0 {
		return ""
	}
	return strconv.FormatInt(todoID, 10) + ":" + strconv.Itoa(deadLetterCount)
}

// QuarantineSubject is the subject of a webhook's quarantines (D7): the
// webhook, so the outbox's key is "webhook:<id>". "" unless positive.
func QuarantineSubject(webhookID int64) string {
	if webhookID <= 0 {
		return ""
	}
	return strconv.FormatInt(webhookID, 10)
}

// RuleSubject is the subject of a rule.notify event (D7): the rule and
// the delivery's subject key ("<rule>:<subject>"), or the routed event
// when the delivery has no subject ("<rule>:event:<id>"), so the outbox's
// key is "rule:…". "" unless the rule and one of the two are given.
func RuleSubject(ruleID int64, subjectKey string, eventID int64) string {
	switch {
	case ruleID > 0 && subjectKey != "":
		return strconv.FormatInt(ruleID, 10) + ":" + subjectKey
	case ruleID > 0 && eventID > 0:
		return strconv.FormatInt(ruleID, 10) + ":event:" + strconv.FormatInt(eventID, 10)
	}
	return ""
}
