// Package store holds the engine's SQL statements and its embedded
// migrations: the outbox and its fan-out, claims, delivery records and
// reservations, sinks, connections, subscriptions, digests, the janitor,
// instances. It speaks pgx only, imports nothing of ours but the
// vocabulary package (notifytype), and names no table of a host's: the
// engine reaches a host's objects through the engine.Directory the host
// implements. The reference host's statements and migrations are in
// host/hoststore, which builds on this package.
//
// The engine's tables live in their own PostgreSQL schema, switchboard
// (EngineSchema), and every statement names them there
// (switchboard.outbox): Emit runs inside an embedder's transaction, on the
// embedder's connection, whose search_path the engine neither relies on nor
// changes.
//
// schema/engine holds the engine's migrations, plain SQL files applied in
// name order, each in its own transaction under a transaction-level
// advisory lock (LockMigrations, which a host's set takes too) so that
// instances starting together apply each file once; the history is
// switchboard.migrations (MigrateEngine; engine/enginemigrate is the
// embedder's entry point, EngineMigrations the files for golang-migrate or
// goose). Nothing in it references a table outside the schema: owners and
// actors are opaque ids the embedder's Directory vouches for.
//
// migrations/ is the legacy set of the builds before the split (one
// history, schema_migrations, every table in the current schema). It is
// frozen: the entry points use it only to bring an old database to its
// end and convert it in place (convertLegacy), moving the engine's tables
// into switchboard and leaving the rest, the reference host's, to its own
// set. A landed migration is never edited: a change is a new file in the
// set it belongs to.
package store
