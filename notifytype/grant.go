package notifytype

import "slices"

// Grant is a verb family an endpoint's owner may grant it (D5).
type Grant string

const (
	// GrantTodos: claim, heartbeat, complete, fail.
	GrantTodos Grant = "todos"
	// GrantRules: set_webhook_rules, add_webhook_rule, update_webhook_rule,
	// test_webhook_rules.
	GrantRules Grant = "rules"
	// GrantNotifications: list_sinks, set_sink, delete_sink, test_sink,
	// set_sink_subscriptions. Never a default (REQ-5).
	GrantNotifications Grant = "notifications"
	// GrantNotifyOwner: notify_owner. Never a default (REQ-6).
	GrantNotifyOwner Grant = "notify_owner"
)

// Grants lists every verb family.
var Grants = []Grant{GrantTodos, GrantRules, GrantNotifications, GrantNotifyOwner}

// DefaultGrants is the default grant and the operator API's basics vend:
// todos and rules, never notifications or notify_owner.
var DefaultGrants = []Grant{GrantTodos, GrantRules}

// Valid reports whether g is a known verb family.
func (g Grant) Valid() bool { return slices.Contains(Grants, g) }
