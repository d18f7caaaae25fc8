// Package dbrestart is scenario 2 of the reliability suite: an engine
// drains due rows from a private PostgreSQL cluster (package pgcluster,
// never the shared server) that is restarted mid-drain, and whose
// connections are then killed with pg_terminate_backend, then stopped
// across a digest's scheduled minute. The engine must reconnect by itself
// (its claimer, its LISTEN connection, its digest scheduler, which sends
// the digest once, and its janitor), lose nothing, and say how many rows
// it sent twice.
package dbrestart
