// Command mutants proves the delivery core's guards (issue 23, item 10):
// for each mutant of faults/mutants.List it copies the module's working
// tree to a scratch directory, removes the guard there by exact snippets
// (a snippet that does not match exactly once is an error, not a pass),
// and runs the tests named to kill it (go test -count=1 -run ..., without
// -race, with the tests' default checks). It reports each mutant KILLED
// (the tests failed), SURVIVED (they passed: nothing proves the guard) or
// BROKEN (the mutant does not compile: an error of the list), and exits
// non-zero unless every mutant was killed.
//
//	make mutants        # every mutant, after a baseline run of their tests
//	make mutants-fast   # the fast subset CI runs (MUTANTS=fast)
//	go run ./faults/cmd/mutants -run 'token-' -j 1
//	go run ./faults/cmd/mutants -docs   # rewrite the table of docs/RELIABILITY.md
//
// Flags: -j mutants at once (default min(GOMAXPROCS, 2)); -fast; -run
// regexp of ids; -timeout of each go test; -baseline (run the tests
// unmutated first: they must pass); -markdown (print the docs' table);
// -docs; -keep (keep the scratch copies). Each mutant's go test output is
// kept in bin/mutants/<id>.log. The databases that pgtestdb keeps for a
// failed test are dropped once the log has named them, with the template
// of a mutated schema.
package main
