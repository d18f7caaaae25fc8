package rest

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Prefix is where the API lives.
const Prefix = "/api/v1"

// server is the API's handlers and what they act on.
type server struct {
	d   httpx.Deps
	log *slog.Logger
}

// handlerFunc serves one route for an authenticated human; a returned
// error is answered through httpx.WriteError.
type handlerFunc func(s *server, w http.ResponseWriter, r *http.Request, p engine.Principal) error

// route is one method and path of the API.
type route struct {
	pattern string // a ServeMux pattern: "METHOD /api/v1/..."
	handle  handlerFunc
}

// routes is every route of the API; openapi.yaml documents each.
var routes = []route{
	{"GET " + Prefix + "/sinks", (*server).listSinks},
	{"POST " + Prefix + "/sinks", (*server).createSink},
	{"GET " + Prefix + "/sinks/{id}", (*server).getSink},
	{"PATCH " + Prefix + "/sinks/{id}", (*server).updateSink},
	{"DELETE " + Prefix + "/sinks/{id}", (*server).deleteSink},
	{"POST " + Prefix + "/sinks/{id}/test", (*server).sendTest},
	{"GET " + Prefix + "/sinks/{id}/deliveries", (*server).listDeliveries},

	{"GET " + Prefix + "/sinks/{id}/subscriptions", (*server).listSubscriptions},
	{"POST " + Prefix + "/sinks/{id}/subscriptions", (*server).addSubscription},
	{"PUT " + Prefix + "/sinks/{id}/subscriptions", (*server).setSubscriptions},
	{"DELETE " + Prefix + "/sinks/{id}/subscriptions/{sub}", (*server).deleteSubscription},

	{"GET " + Prefix + "/connections", (*server).listConnections},
	{"POST " + Prefix + "/connections", (*server).createConnection},
	{"DELETE " + Prefix + "/connections/{id}", (*server).deleteConnection},

	{"GET " + Prefix + "/endpoints", (*server).listEndpoints},
	{"POST " + Prefix + "/endpoints", (*server).vendEndpoint},
	{"DELETE " + Prefix + "/endpoints/{id}", (*server).revokeEndpoint},

	{"GET " + Prefix + "/queues", (*server).listQueues},
	{"POST " + Prefix + "/queues", (*server).createQueue},
	{"POST " + Prefix + "/queues/{id}/todos", (*server).enqueueTodo},
	{"POST " + Prefix + "/todos/{id}/interrupt", (*server).interruptTodo},
	{"POST " + Prefix + "/todos/{id}/requeue", (*server).requeueTodo},

	{"GET " + Prefix + "/openapi.yaml", (*server).openAPI},
}

// New returns the operator REST API. Every request must carry a human's
// operator bearer token (else 401 unauthenticated with WWW-Authenticate:
// Bearer) and spends one token of that human's share of d.Limiter (else
// 429 rate_limited). The standard headers and the 16 KiB body limit are
// applied here too, so the handler is safe on its own; applying them again
// outside is harmless. d.Engine, d.Auth, d.Endpoints, d.Todos and
// d.Limiter are required; d.Logger defaults to slog.Default().
func New(d httpx.Deps) http.Handler {
	if d.Engine == nil || d.Auth == nil || d.Endpoints == nil || d.Todos == nil || d.Limiter == nil {
		panic("rest: New needs Deps.Engine, Deps.Auth, Deps.Endpoints, Deps.Todos and Deps.Limiter")
	}
	s := &server{d: d, log: d.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.Handle(rt.pattern, s.serve(rt.handle))
	}
	return httpx.Headers(httpx.LimitBody(s.guard(mux)))
}

// guard answers a request no route takes (404, or 405 with Allow) as a
// JSON error, after the same authentication and limiter as every route, so
// that nothing of the API, not even which routes exist, answers a caller
// without a valid token.
func (s *server) guard(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		if _, ok := s.authenticate(w, r); !ok {
			return
		}
		// The mux would answer 404 or 405 in plain text: learn which (and
		// the Allow header) from it, and answer in JSON.
		pr := &probe{header: http.Header{}}
		h.ServeHTTP(pr, r)
		if pr.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", pr.header.Get("Allow"))
			httpx.WriteJSON(w, http.StatusMethodNotAllowed, errorBody("method_not_allowed", "this route does not take "+r.Method))
			return
		}
		httpx.WriteError(w, r, s.log, notifytype.NotFound("route"))
	})
}

// serve authenticates the caller and spends their limiter token, then runs
// h; an error h returns is answered through httpx.WriteError.
func (s *server) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if err := h(s, w, r, p); err != nil {
			httpx.WriteError(w, r, s.log, err)
		}
	})
}

// authenticate resolves the caller's bearer token to a human and spends one
// of their limiter tokens. When it returns false it has answered: 401
// unauthenticated with WWW-Authenticate, 429 rate_limited, or 500.
func (s *server) authenticate(w http.ResponseWriter, r *http.Request) (engine.Principal, bool) {
	p, err := s.d.Auth.Human(r.Context(), r)
	switch {
	case httpx.IsUnauthenticated(err):
		httpx.WriteUnauthenticated(w, "a valid operator API bearer token is required")
		return engine.Principal{}, false
	case err != nil:
		httpx.WriteError(w, r, s.log, err)
		return engine.Principal{}, false
	case !s.d.Limiter.Allow(hostid.Number(p.HumanID)):
		httpx.WriteError(w, r, s.log, notifytype.RateLimited("too many requests; slow down"))
		return engine.Principal{}, false
	}
	return p, true
}

// errorBody is the error shape for the two answers no notifytype code
// carries (401, 405).
func errorBody(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

// probe records what a handler would answer, discarding the body.
type probe struct {
	header http.Header
	status int
}

func (p *probe) Header() http.Header         { return p.header }
func (p *probe) Write(b []byte) (int, error) { return len(b), nil }
func (p *probe) WriteHeader(status int)      { p.status = status }

// pathID reads the positive integer path value name; anything else names
// no resource and is not_found for what.
func pathID(r *http.Request, name, what string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, notifytype.NotFound(what)
	}
	return id, nil
}

// ownerParam reads the owner query parameter ("human:<id>" or
// "team:<id>"), defaulting to the caller's own human scope.
func ownerParam(r *http.Request, p engine.Principal) (notifytype.OwnerScope, error) {
	return ownerOr(r.URL.Query().Get("owner"), p)
}

// ownerOr parses an owner scope given by the caller, or the caller's own
// human scope when v is empty; a malformed one is invalid_argument owner.
func ownerOr(v string, p engine.Principal) (notifytype.OwnerScope, error) {
	if v == "" {
		return notifytype.Human(p.HumanID), nil
	}
	scope, err := notifytype.ParseOwnerScope(v)
	if err != nil {
		return notifytype.OwnerScope{}, notifytype.InvalidArgument("owner", "must be human:<id> or team:<id>")
	}
	return scope, nil
}

// decode reads a JSON body into v (httpx.DecodeJSON: unknown fields and a
// body over 16 KiB refused).
func decode(r *http.Request, v any) error {
	if r.Body == nil || r.Body == http.NoBody {
		return notifytype.InvalidArgument("body", "a JSON object is required")
	}
	return httpx.DecodeJSON(r, v)
}

// remapField answers err with its field renamed when the service named a
// field by its own name (from) and this API calls it otherwise (to).
func remapField(err error, names map[string]string) error {
	e, ok := notifytype.AsError(err)
	if !ok {
		return err
	}
	to, ok := names[e.Field]
	if !ok {
		return err
	}
	c := *e
	c.Field = to
	return &c
}

// noContent answers 204.
func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// list answers a collection as {"<key>": [...]}, never null.
func list[T any](w http.ResponseWriter, key string, items []T) error {
	if items == nil {
		items = []T{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string][]T{key: items})
	return nil
}
