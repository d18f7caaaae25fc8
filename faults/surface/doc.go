// Package surface holds scenarios 5, 6 and 7 of the reliability suite,
// against the assembled server (REST API, web UI, MCP, ops) over a serving
// engine, as serve builds it:
//
//   - secrets: one canary token, Apprise URL and authorization value are
//     planted through the API and driven through success, every failure
//     class, API errors, MCP errors and web pages; every log line,
//     response body, tool result and database column is then searched;
//   - hostile input: fuzz targets (message sanitisation, rendering, Apprise
//     URL and secret parsing, API JSON bodies) with seed corpora under
//     testdata/fuzz, and hand-written hostile requests (over-long bodies,
//     wrong content types, cross-site form posts, other scopes' ids, forged
//     credentials) that must be refused with the right code and store
//     nothing;
//   - load: a bounded load on loopback showing the per-human limiter and
//     the send-test limit hold while the server stays responsive (p99), and
//     the outbox drains afterwards with nothing lost.
package surface
