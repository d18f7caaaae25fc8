package ops

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// New serves GET /ops/actors and GET /metrics to holders of an operator API
// token (or a web session, for the actors table), scoped as D26 says: an
// operator (a human granted the role with the binary's grant-operator
// command) sees every sink actor of the instance and the metrics; any
// other human sees the actors of their own scopes' sinks only (their own
// and their teams'), and /metrics answers them forbidden.
func New(d httpx.Deps, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	mux.Handle("GET /metrics", requireHuman(d, func(w http.ResponseWriter, r *http.Request, p engine.Principal) {
		operator, err := d.Accounts.IsOperator(r.Context(), hostid.Number(p.HumanID))
		if err != nil {
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		if !operator {
			httpx.WriteError(w, r, d.Logger, notifytype.Forbidden("/metrics is for operators (switchboard-notify grant-operator)"))
			return
		}
		metrics.ServeHTTP(w, r)
	}))
	mux.Handle("GET /ops/actors", requireHuman(d, func(w http.ResponseWriter, r *http.Request, p engine.Principal) {
		actors, err := VisibleActors(r, d, p)
		if err != nil {
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"actors": actors})
	}))
	return httpx.Headers(mux)
}

// VisibleActors is the actor table p may see: every actor for an
// operator, else those of p's own scopes' sinks (D26). The scoped table
// costs p's sinks, not the instance's actors: the engine lists the sinks
// of p's scopes by index and looks their actors up (Engine.SinkStatuses).
func VisibleActors(r *http.Request, d httpx.Deps, p engine.Principal) ([]engine.SinkStatus, error) {
	operator, err := d.Accounts.IsOperator(r.Context(), hostid.Number(p.HumanID))
	if err != nil {
		return nil, err
	}
	if operator {
		return d.Engine.AllSinkStatuses(), nil
	}
	return d.Engine.SinkStatuses(r.Context(), p)
}

// requireHuman lets through a request carrying an operator API token or a
// web session, with the human acting.
func requireHuman(d httpx.Deps, next func(http.ResponseWriter, *http.Request, engine.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := d.Auth.Human(r.Context(), r)
		if httpx.IsUnauthenticated(err) {
			p, err = d.Auth.Session(r.Context(), r)
		}
		if err != nil {
			if httpx.IsUnauthenticated(err) {
				httpx.WriteUnauthenticated(w, "an operator API token is required")
				return
			}
			httpx.WriteError(w, r, d.Logger, err)
			return
		}
		next(w, r, p)
	})
}
