// Package notifytype is the shared vocabulary of Switchboard Notify: owner
// scopes, event type names (their syntax; which types exist is the
// embedder's to declare, engine.EventKind), severities, delivery
// error classes, and the sentinel errors that carry the spec's stable codes
// (forbidden_scheme, encryption_required, invalid_argument, forbidden,
// not_found).
//
// It is a leaf: every package of the module may import it and it imports
// nothing of ours. Surfaces map its codes to HTTP statuses and MCP errors in
// one table each; nothing else should switch on error strings.
package notifytype
