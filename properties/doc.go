// Package properties holds property-based tests (pgregory.net/rapid) of the
// engine's invariants against a real PostgreSQL: outbox rows exist exactly
// for committed transactions, repeats of a key never open a second row and
// their counts add up, no event lands on another scope's sink, a sink's
// sends never exceed its token bucket with 1 to 4 engines sharing the
// database, attempts follow D10's schedule exactly, and held rows go out
// once, coalesced.
package properties
