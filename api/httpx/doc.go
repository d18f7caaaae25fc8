// Package httpx is what every surface of the server shares: the one table
// mapping the spec's error codes to HTTP statuses, JSON error bodies, the
// standard security headers, the 16 KiB body limit, the per-human rate
// limiter, and resolving a request's credential to the principal it acts
// as. The surfaces (rest, web, mcpserver, ops) are thin adapters over the
// engine's service layer; nothing here decides a rule of the spec.
package httpx
