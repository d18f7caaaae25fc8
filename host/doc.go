// Package host is the reference host: just enough of the system around
// Switchboard Notify to drive every event source for real, over its own
// tables (humans, teams, endpoints, queues, todos, webhooks, ...), which
// Migrate creates after the engine's. It stands in for the systems a
// real embedder has (accounts, queues and todos, webhooks) and is what our
// server embeds the engine in; an embedder with its own schema replaces it.
//
// Directory implements engine.Directory: which humans and endpoints exist
// (the engine keeps them as opaque ids), team roles from team_members, and
// ownership of queues, endpoints, webhooks and todos by their owner column.
//
// Todos is the queues-and-todos stand-in (SPEC-0003, D15) with its attempt
// history (SPEC-0034, D16): enqueue, claim under a lease, heartbeat,
// complete, fail, the lease reaper, endpoint revocation, interrupt and a
// human's re-queue. Every dead letter calls the engine's Emit in the same
// transaction as the state change, so a notification exists exactly when
// the dead letter commits (REQ-10), and the todo ends the same whether or
// not any sink hears of it (REQ-1).
//
// Webhooks is the webhooks-and-routing-rules stand-in (SPEC-0020, D17) with
// its quarantine (SPEC-0026): webhooks with a sealed signing secret and
// trusted senders, ordered jq rules checked at save, and Receive, which
// takes a signed delivery and, in one transaction, stores it with its
// outcome and routing trace, creates its todo, and emits
// delivery.quarantined (Emit) or one rule.notify per named sink
// (EmitToSink). It is the one service the web UI, the operator API and the
// MCP rule verbs call.
//
// Accounts creates humans and teams and mints their credentials (D4).
package host
