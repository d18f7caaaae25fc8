// Package properties holds property-based tests (pgregory.net/rapid) of the
// engine's invariants against a real PostgreSQL: outbox rows exist exactly
// for committed transactions, repeats of a key never open a second row and
// their counts add up, and no event lands on another scope's sink. Later
// issues add budgets, backoff, coalescing and multi-instance claims here.
package properties
