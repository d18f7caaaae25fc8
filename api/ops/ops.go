package ops

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard/notify/api/httpx"
)

// New serves GET /ops/actors and GET /metrics to holders of an operator API
// token (or a web session, for the actors table).
func New(d httpx.Deps, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", requireHuman(d, metrics))
	mux.Handle("GET /ops/actors", requireHuman(d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"actors": d.Engine.Status()})
	})))
	return httpx.Headers(mux)
}

// requireHuman lets through a request carrying an operator API token or a
// web session.
func requireHuman(d httpx.Deps, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := d.Auth.Human(r.Context(), r)
		if httpx.IsUnauthenticated(err) {
			_, err = d.Auth.Session(r.Context(), r)
		}
		if err != nil {
			if httpx.IsUnauthenticated(err) {
				httpx.WriteUnauthenticated(w, "an operator API token is required")
				return
			}
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
