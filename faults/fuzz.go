package faults

import "time"

// FuzzTarget is one fuzz target the suite runs (go test -fuzz), in the
// package that holds it.
type FuzzTarget struct {
	// Pkg is the package's path from the module root, "./engine/digest".
	Pkg string
	// Name is the target, "FuzzParse".
	Name string
	// What says what the target feeds hostile input to, for the table.
	What string
	// Warmup is how long the target needs before its first generated
	// input, added to its fuzz time so that it fuzzes for as long as the
	// others: go test's -fuzztime counts the baseline run of every seed,
	// and a target whose seeds each go through another process (a Python
	// Apprise per worker) can spend a short run on that alone. Zero for
	// most.
	Warmup time.Duration
}

// FuzzTargets is every fuzz target of the module: `make faults` runs each
// for FAULTS_FUZZTIME and CI for 5 s (cmd/faults-fuzz, which counts their
// inputs into the table's "bad inputs tried"). A test of faults/surface
// fails when a Fuzz function of the module is missing here.
var FuzzTargets = []FuzzTarget{
	{Pkg: "./faults/surface", Name: "FuzzClean", What: "message sanitisation"},
	{Pkg: "./faults/surface", Name: "FuzzRender", What: "message rendering"},
	{Pkg: "./faults/surface", Name: "FuzzAppriseURL", What: "Apprise URL scheme check"},
	{Pkg: "./faults/surface", Name: "FuzzAppriseSecret", What: "Apprise secret parsing"},
	// Each of its inputs goes through a whole REST server and its
	// database: its baseline (seeds and the machine's fuzz cache, about 100
	// inputs) took all of a 5 s run beside a CPU burner, and no input was
	// tried (a CI run of session 7).
	{Pkg: "./faults/surface", Name: "FuzzRESTBody", What: "REST API JSON bodies", Warmup: 15 * time.Second},
	{Pkg: "./sinks/apprise", Name: "FuzzCheckSchemes", What: "Apprise URL splitting against Apprise's own reading"},
	{Pkg: "./sinks/apprise", Name: "FuzzDestinationsMatchApprise", What: "Apprise URL hosts against the hosts Debian's apprise reaches (differential)", Warmup: 30 * time.Second},
	{Pkg: "./engine/digest", Name: "FuzzParse", What: "digest schedule parser (D19)"},
	{Pkg: "./engine", Name: "FuzzDecodeStoredFastAgreesWithEncodingJSON", What: "stored payloads read without reflection, against encoding/json (differential)"},
	{Pkg: "./host", Name: "FuzzRuleSave", What: "webhook rule expressions and actions, saved"},
	{Pkg: "./host/rulesandbox", Name: "FuzzRuleSandbox", What: "arbitrary jq programs run in rule worker processes (issue 24)"},
}
