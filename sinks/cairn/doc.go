// Package cairn publishes digests as Markdown artifacts to a Cairn server
// (REQ-14, D20), a stand-in client for the Cairn artifact store.
//
//	POST {base}/v1/artifacts  Authorization: Bearer <secret>
//	  {name, content_type: "text/markdown", content, ttl_seconds, tags}
//	  → 201 {id, url, expires_at}
//	GET  {base}/v1/limits     Authorization: Bearer <secret>
//	  → 200 {max_ttl_seconds}
//
// Every request goes through the SSRF-guarded client the engine gives it
// (sinks.NewClient): HTTPS only unless the operator opted in, no redirects,
// destinations checked at dial time. Errors are classified like a sink's
// (D11) and redacted: no secret, body or URL in them.
package cairn
