// Package digest holds the parts of the queue digest (REQ-12, REQ-13) that
// need no database: the schedule grammar of D19 with its next-send
// arithmetic over the embedded zone database, and the report a digest is
// built into, with its quiet rule and its Markdown rendering.
//
// The engine builds reports from the host's sources and schedules them;
// this package only computes and renders. Everything here is pure and safe
// for concurrent use.
package digest
