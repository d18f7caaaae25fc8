// Package migrationtools proves, with the real libraries, that an
// embedder may apply the engine's migrations (enginemigrate.FS) with its
// own tool instead of enginemigrate.Up: golang-migrate and goose each
// keep their history in a table of their own in the public schema, and
// the engine starts on the schema they applied, because the schema says
// its version (switchboard.schema_version()). It is a module of its own so
// that those tools never become dependencies of the engine's module;
// `make test` runs it.
package migrationtools
