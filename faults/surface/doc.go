// Package surface holds scenarios 5, 6 and 7 of the reliability suite,
// against the assembled server (REST API, web UI, MCP, ops, /hooks/{id})
// over a serving engine, as serve builds it:
//
//   - secrets: one canary token, Apprise URL and authorization value are
//     planted through the API and driven through success, every failure
//     class, an adapter panic whose value quotes them, API errors, MCP
//     errors and web pages; every log line,
//     response body, tool result and database column is then searched;
//   - hostile input: fuzz targets (message sanitisation, rendering, Apprise
//     URL and secret parsing, API JSON bodies) with seed corpora under
//     testdata/fuzz, and hand-written hostile requests (over-long bodies,
//     wrong content types, cross-site form posts, other scopes' ids, forged
//     credentials) that must be refused with the right code and store
//     nothing; a test fails when a fuzz target of the module is not in
//     faults.FuzzTargets (the schedule parser's and the rule save path's
//     live in their own packages);
//   - load: a bounded load on loopback, REST API and signed posts to
//     /hooks/{id}, showing the per-human limiter, the send-test limit, the
//     hooks' signature and size bounds and the quarantine storm's one
//     message hold while the server stays responsive (p99), and the outbox
//     drains afterwards with nothing lost.
package surface
