// Package rulesandbox runs the jq programs owners and default-grant agents
// write (a webhook's routing rules, its sender and subject expressions) in
// worker processes whose time and memory the operating system bounds, so
// that no construct of gojq, listed or not, can cost the server more than
// its limits (issue 24 items 1 to 3).
//
// The workers are the server's own binary re-executed: MaybeRunWorker, run
// from this package's init (so every binary that links it, test binaries
// included, can serve as a worker) and called again at the top of main,
// turns a process started with the worker argument and environment into a
// worker before anything else runs. A worker sets its own limits first
// (RLIMIT_DATA and RLIMIT_AS for memory, with GOMEMLIMIT under them; RLIMIT_CPU per
// request; GOMAXPROCS=1), then answers framed JSON requests on stdin with
// framed JSON replies on stdout: compile these programs, or run them on
// this input. It keeps compiled programs in a cache bounded in bytes that
// dies with it.
//
// The parent (Pool) never compiles or runs an untrusted program in its own
// process. It gives each request a wall deadline per program and SIGKILLs
// a worker that passes it, or the caller's budget; a worker that died of a
// limit answers that program as a fault saying which limit it passed, and
// the programs after it go to a fresh worker. Fairness: each owner may
// hold at most PerOwner workers at once, its requests served in the order
// they came, and the pool spawns a worker whenever none is idle, up to
// Workers; so one owner's slow rules never hold another owner's
// evaluation, short of Workers/PerOwner owners all busy at once. Reserve
// ready workers are kept for owners that hold none, so that such an
// owner's delivery never waits for a worker to start; and a worker whose
// program has used a quarter of its time limit in CPU is lowered to the
// lowest priority (and not reused), so that a hostile owner's workers,
// running to their limits, leave the CPU to the server and to ordinary
// rules.
//
// The checked subset of jq (lang.go) still runs first inside the worker:
// it gives clear messages and a per-run work budget, but it is a filter,
// not the bound: the tests run hostile programs with it switched off.
package rulesandbox
