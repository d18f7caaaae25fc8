// Package api assembles the server's surfaces into one handler: the
// operator REST API (rest), the web UI (web), the MCP server (mcpserver),
// ops status and metrics (ops) and, under make run, the demo (demo). Each
// surface is a thin adapter over the engine's service layer, so they pass
// the same checks; what they share is in httpx.
package api
