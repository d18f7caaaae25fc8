// Package engine is the public face of Switchboard Notify for an embedding
// server.
//
// An embedder calls Emit inside the transaction that changes its state (a
// todo dead-letters, a delivery is quarantined, a rule matches), so the
// notification exists exactly when the change commits: Emit writes one row
// for the event when some subscription matches it. An event addressed to
// one sink by name (a routing rule's notify) goes through EmitToSink
// instead, which writes that sink's outbox row in the same transaction. It
// runs Serve (or Start and Stop) to deliver what was emitted: a claimer
// per instance fans events out into one outbox row per matching sink
// (coalescing repeats of a dedup key), claims due rows and hands them to
// one supervised actor per sink, which spends the sink's budget, sends,
// retries and records. It reads SinkStatuses to watch the actors, and
// manages sinks, subscriptions and connections through the management
// service (CreateSink, UpdateSink, SetSubscriptions, SendTestMessage, ...),
// which holds every rule of the spec so that every surface (web UI, REST
// API, MCP) passes the same checks.
//
// That is all an embedder needs, and all Engine's methods are. The
// reference product's own features are built on the engine in packages of
// their own, which an embedder may use or leave: engine/digests (queue
// digests, whose scheduler runs under the engine's supervision once made),
// engine/pages (an agent paging its owner, sign-in links), engine/warnings
// (save-time warnings about destinations the guard will refuse),
// engine/history (the board's notification lists and the write log) and
// engine/clocks (the database's clock for a host's own code).
//
// The engine knows nothing of a particular host. What it must ask of the
// surrounding system (a human's role in a team, whether a queue, endpoint or
// webhook belongs to an owner scope) it asks through Directory, which the
// embedder implements; the reference host in package host does so over its
// own tables.
package engine
