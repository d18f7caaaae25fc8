// Package mcpserver is the MCP surface: the verbs an agent's endpoint may
// call, served over streamable HTTP with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// Every request must carry the endpoint's vended bearer credential (D4);
// a missing, unknown or revoked one is answered 401 with
// WWW-Authenticate: Bearer before the SDK sees the request. The endpoint's
// grant picks the server that answers it, one cached server per grant
// holding only the granted families' tools (D5), so tools/list differs per
// endpoint: todos (claim, heartbeat, complete, fail, list_queues, over
// host.Todos), rules (the rule verbs and list_webhooks, over host.Webhooks),
// notifications (list_sinks, list_connections, set_sink, delete_sink,
// test_sink, set_sink_subscriptions and the digest verbs, over the engine's
// management service in the endpoint's owner scope; they share the operator
// API's per-human limiter) and notify_owner (over pages.NotifyOwner). The
// list verbs (lists.go) are how an agent discovers the ids the others take. A verb outside the grant
// called by name anyway is answered as a forbidden tool error, not the
// SDK's "unknown tool".
//
// The surface is thin: every rule of the spec (grants, scopes, roles,
// limits, schemes, ceilings, budgets) is checked by the engine or the host,
// which the web UI and the REST API call too; the only rule here is the
// family filter of tools/list and tools/call.
//
// Every verb is added with addTool (tools.go), and every tool call passes
// guard (mcpserver.go), so what follows holds for every tool, whatever
// family adds it. Arguments are checked against the tool's input schema
// before the verb runs (arguments.go): a client's mistake is
// invalid_argument naming the field by its path as the client wrote it.
// The schemas say what is sent (schema.go): no null, allowed values as
// enum, enforced limits as minimum, maximum and the like (refine.go). Refusals come
// back as tool results with IsError set, a text naming code, field and what
// to do, and {code, field, scheme, message} in _meta under MetaKeyError,
// mapped from *notifytype.Error through one table (errors.go). They carry
// no structured content: clients check it against the tool's output
// schema, which describes success.
//
// Only the tools capability is declared, and the methods of the others
// (prompts, resources, completions, logging) are answered as method not
// found. Before the credential, a browser's Origin is checked against
// DNS rebinding (origin.go). Each request is logged in one line when it
// ends (requestlog.go); the SDK's own lines go to DEBUG.
//
// The server is stateless (no Mcp-Session-Id is kept): each request is
// authenticated on its own, so a revoked credential stops working at once
// and any instance can answer any request.
package mcpserver
