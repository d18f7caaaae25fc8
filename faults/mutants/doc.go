// Package mutants is the list of the delivery core's guards that the
// tests must prove (issue 23, item 10), as mutants: each removes one guard
// from a copy of the source, by exact snippets, and names the tests that
// must fail once it is gone. cmd/mutants (make mutants) applies each to a
// scratch copy of the module and runs its tests; a mutant the tests do not
// kill is a guard nothing proves.
//
// A mutant whose snippet no longer matches exactly once is an error, never
// a pass: TestEveryMutantApplies checks this on every `make test`, and
// TestReliabilityDocListsEveryMutant that docs/RELIABILITY.md lists the
// mutants as List has them (`go run ./faults/cmd/mutants -docs` rewrites
// that table).
package mutants
