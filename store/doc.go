// Package store holds every SQL statement of Switchboard Notify and its
// embedded migrations. It speaks pgx only and imports nothing of ours but
// the vocabulary package (notifytype).
//
// The engine's tables live in their own PostgreSQL schema, switchboard
// (EngineSchema), and every statement names them there
// (switchboard.outbox): Emit runs inside an embedder's transaction, on the
// embedder's connection, whose search_path the engine neither relies on nor
// changes. The reference host's tables (humans, teams, endpoints, queues,
// todos, webhooks, ...) live in the connection's current schema.
//
// Migrations come in two sets of plain SQL files, applied in name order,
// each file in its own transaction under a transaction-level advisory lock
// so that instances starting together apply each file once:
//
//   - schema/engine: the engine's tables, history in switchboard.migrations
//     (MigrateEngine; engine/enginemigrate is the embedder's entry point,
//     EngineMigrations the files for golang-migrate or goose). Nothing in
//     it references a table outside the schema: owners and actors are
//     opaque ids the embedder's Directory vouches for.
//   - schema/host: the reference host's tables, history in host_migrations
//     (MigrateHost, after the engine's; host.Migrate runs both).
//
// migrations/ is the legacy set of the builds before the split (one
// history, schema_migrations, every table in the current schema). It is
// frozen: the entry points use it only to bring an old database to its
// end and convert it in place (convertLegacy). A landed migration is never
// edited: a change is a new file in the set it belongs to.
package store
