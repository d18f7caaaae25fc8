// Package jobs is a small job service that embeds Switchboard Notify the
// way an outside service would, with nothing of the reference host: its
// users are keyed by uuid (the engine's owner ids are the service's own
// strings), its one event type is its own (job.failed, declared with its
// words, severity, dedup rule and message), its links point at its own
// pages, and both schemas — the service's and the engine's — are applied
// by golang-migrate, the engine's from enginemigrate.FS() with a history
// table of its own.
//
// The service's code is three calls an embedder writes once:
//
//   - Migrate applies the service's migrations, then the engine's;
//   - Config is the engine configuration: the declared event type
//     (JobFailed), the service's links and a Directory over its users;
//   - Fail marks a job failed and emits job.failed in the same
//     transaction, so the notification exists exactly when the failure
//     commits.
//
// jobs_test.go tests it with the engine's kit (engine/notifytest): the
// emit is seen in the service's own transaction and is gone after a
// rollback; a committed failure reaches the owner's Gotify in the
// service's words and link, once per run.
package jobs
