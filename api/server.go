package api

import (
	"net/http"

	"github.com/switchboard/notify/api/hooks"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/mcpserver"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/api/rest"
	"github.com/switchboard/notify/api/web"
)

// Options are the parts of the server beyond Deps.
type Options struct {
	// Metrics feed GET /metrics. Required.
	Metrics *ops.Metrics
	// Health answers GET /healthz. Optional.
	Health http.Handler
	// Demo serves /demo when make run's demo is on. Optional.
	Demo http.Handler
}

// NewHandler returns the whole server: every response carries the
// standard headers and every body is bounded at 16 KiB, but webhook
// deliveries at /hooks/{id}, bounded at 256 KiB.
func NewHandler(d httpx.Deps, o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", rest.New(d))
	mcp := mcpserver.New(d)
	mux.Handle("/mcp", mcp)
	mux.Handle("/mcp/", mcp)
	opsHandler := ops.New(d, o.Metrics)
	mux.Handle("GET /ops/actors", opsHandler)
	mux.Handle("GET /metrics", opsHandler)
	if o.Health != nil {
		mux.Handle("GET /healthz", o.Health)
	}
	if o.Demo != nil {
		mux.Handle("/demo", o.Demo)
		mux.Handle("/demo/", o.Demo)
	}
	mux.Handle("/", web.New(d))
	// Webhook deliveries have their own body bound (256 KiB), so they sit
	// beside the 16 KiB limit of every management route, not under it.
	root := http.NewServeMux()
	root.Handle("/hooks/", hooks.New(d))
	root.Handle("/", httpx.LimitBody(mux))
	return httpx.Headers(root)
}
