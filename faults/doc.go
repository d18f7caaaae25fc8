// Package faults is the reliability and security suite (issue 11): each
// scenario in its subpackages injects one kind of fault — a process killed
// mid-drain (crash), the database restarted under the engine (dbrestart),
// sinks that misbehave (sinkfaults), clocks that disagree (skew), a full
// pool as the database's clock is read (dbclock), hostile destinations
// (ssrf), and
// hostile callers, planted secrets and load on the assembled server
// (surface) — and reports one row of a shared table: the scenario, the
// load held, the faults injected, the bad inputs tried, the rows lost, the
// duplicates and the secrets found.
//
// This package holds what the scenarios share: the row and where it is
// written (Report), the per-run canary (Canary), the checks and the list
// of those an operator marks pending for a run (Expect and
// SWITCHBOARD_FAULTS_PENDING; none is by default), the short/full switch
// (Full) and every fuzz target of the module (FuzzTargets). `make faults`
// runs the full suite, then every fuzz target (cmd/faults-fuzz, whose
// inputs are a row too), and prints the table (cmd/faults-table); `go
// test ./...` runs the short version, and CI adds the fuzzers for a few
// seconds each.
package faults
