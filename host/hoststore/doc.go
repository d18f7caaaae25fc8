// Package hoststore holds the SQL of the reference host (humans, teams,
// endpoints, sessions, queues, todos, webhooks, their rules and
// deliveries) and the host's migrations. The engine's statements are in
// store; this package builds on it (DBTX, Beginner, the migration lock)
// and never the other way round: nothing of the engine reads a table of
// the host's except through the engine.Directory the host implements.
//
// The host's tables live in the connection's current schema, beside the
// engine's schema switchboard, and their migrations are a set of their
// own, schema/host, recorded in host_migrations (Migrate). The engine's
// set must be applied first (host.Migrate runs both): the host's owner
// columns use the engine's owner_scope domain. A landed migration is
// never edited: a change is a new file in the set.
package hoststore
