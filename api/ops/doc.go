// Package ops is what operators watch: GET /ops/actors (each sink actor's
// status as JSON) and GET /metrics (Prometheus: deliveries by state and
// class, held rows, tokens, claim latency, outbox depth), both behind an
// operator API token, and Metrics, which the engine's hooks feed.
package ops
