package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// ServerName is the name the server gives in its implementation info.
const ServerName = "switchboard-notify"

// Version is the version the server gives in its implementation info.
const Version = "1.0.0"

// caller is who a request acts as: the endpoint its credential names.
type caller struct {
	p   engine.Principal
	rec *requestRecord
}

// tokenExtraCaller is the key of the caller in auth.TokenInfo.Extra, which
// the SDK hands each tool call as req.Extra.TokenInfo.
const tokenExtraCaller = "switchboard.caller"

type callerKey struct{}

// surface is the MCP server's state: its dependencies and one server per
// grant.
type surface struct {
	d   httpx.Deps
	log *slog.Logger
	// sdkLog is the SDK's logger: its lines at DEBUG (sdkLogHandler).
	sdkLog *slog.Logger
	// limits are the operator's bounds the tools' schemas declare.
	limits limits

	mu      sync.Mutex
	servers map[string]*mcp.Server
}

// New returns the MCP server over streamable HTTP. Every request must carry
// an endpoint's vended credential as a bearer token (else 401 with
// WWW-Authenticate: Bearer); tools/list shows only the verbs of the
// endpoint's grant. Request bodies are bounded at httpx.MaxBody, and the
// standard headers are set. d.Engine, d.Auth, d.Todos and d.Limiter are
// required; d.Logger defaults to slog.Default().
func New(d httpx.Deps) http.Handler {
	if d.Engine == nil || d.Auth == nil || d.Todos == nil || d.Limiter == nil {
		panic("mcpserver: New needs Deps.Engine, Deps.Auth, Deps.Todos and Deps.Limiter")
	}
	s := &surface{d: d, log: d.Logger, limits: limitsOf(d.Engine), servers: map[string]*mcp.Server{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.sdkLog = slog.New(sdkLogHandler{s.log.Handler()})
	h := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              s.sdkLog,
		MaxRequestBodyBytes: httpx.MaxBody,
		// The SDK's DNS-rebinding guard refuses a request that reached a
		// loopback address under another Host, which is every request from
		// a reverse proxy on the same machine. checkOrigin guards against
		// rebinding instead, by the Origin a browser always sends, and
		// authenticate answers 401 before the SDK sees a request.
		DisableLocalhostProtection: true,
	})
	// The SDK's bearer middleware is what puts a TokenInfo where tool calls
	// see it; authenticate has already checked the credential.
	withToken := auth.RequireBearerToken(tokenInfo, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return httpx.Headers(s.logRequests(s.checkOrigin(s.authenticate(withToken(h)))))
}

// authenticate resolves the request's bearer credential to its endpoint,
// answering 401 with WWW-Authenticate for a missing, unknown or revoked
// one, on every request.
func (s *surface) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recordOf(r.Context())
		p, _, err := s.d.Auth.Endpoint(r.Context(), r)
		switch {
		case httpx.IsUnauthenticated(err):
			rec.set(outcomeUnauthenticated, "")
			httpx.WriteUnauthenticated(w, "a valid endpoint credential is required as a bearer token")
			return
		case err != nil:
			rec.fail(err)
			httpx.WriteError(w, r, s.log, err)
			return
		}
		rec.setEndpoint(p.EndpointID)
		ctx := context.WithValue(r.Context(), callerKey{}, &caller{p: p, rec: rec})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tokenInfo is the SDK's token verifier over what authenticate found: the
// endpoint becomes the TokenInfo's user, and the caller rides in Extra.
func tokenInfo(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
	c, ok := ctx.Value(callerKey{}).(*caller)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	scopes := make([]string, len(c.p.Grants))
	for i, g := range c.p.Grants {
		scopes[i] = string(g)
	}
	return &auth.TokenInfo{
		UserID: "endpoint:" + strconv.FormatInt(c.p.EndpointID, 10),
		Scopes: scopes,
		Extra:  map[string]any{tokenExtraCaller: c},
	}, nil
}

// callerOf returns who a request acts as.
func callerOf(req mcp.Request) (*caller, error) {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		if c, ok := extra.TokenInfo.Extra[tokenExtraCaller].(*caller); ok {
			return c, nil
		}
	}
	return nil, errors.New("error reading the caller: the request carries no authenticated endpoint")
}

// granted lists the families of grants that have tools here, in the order
// of notifytype.Grants.
func granted(grants []notifytype.Grant) []notifytype.Grant {
	var out []notifytype.Grant
	for _, g := range notifytype.Grants {
		if slices.Contains(grants, g) && len(families[g]) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// serverFor is the SDK's getServer: the cached server of the request's
// endpoint's grant.
func (s *surface) serverFor(r *http.Request) *mcp.Server {
	c, ok := r.Context().Value(callerKey{}).(*caller)
	if !ok {
		return nil
	}
	fams := granted(c.p.Grants)
	names := make([]string, len(fams))
	for i, f := range fams {
		names[i] = string(f)
	}
	key := strings.Join(names, ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.servers[key]
	if !ok {
		srv = s.newServer(fams)
		s.servers[key] = srv
	}
	return srv
}

// newServer builds a server holding the tools of fams only.
func (s *surface) newServer(fams []notifytype.Grant) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Switchboard Notify", Version: Version},
		&mcp.ServerOptions{
			Instructions: instructionsFor(fams),
			Logger:       s.sdkLog,
			// Tools only: no prompts, resources, completions or logging
			// (guard refuses their methods). The tools of a server never
			// change: an endpoint's grant picks another server instead.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
			// What a list answers depends on the credential: no shared cache
			// may keep it.
			SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
				c.CacheScope, c.TTLMs = "private", 0
			},
		})
	for _, f := range fams {
		for _, v := range families[f] {
			v.add(srv, s)
		}
	}
	srv.AddReceivingMiddleware(s.guard)
	return srv
}

// undeclared lists the methods of capabilities the server does not
// declare (prompts, resources, completions, logging): the SDK would answer
// them (with empty lists), and a client may not rely on what a server does
// not declare, so guard refuses them as method not found.
var undeclared = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true,
	"logging/setLevel":    true,
}

// guard wraps every method the SDK receives. It refuses the methods of
// undeclared capabilities; on tools/call it refuses a verb outside the
// caller's grant as forbidden before the SDK could call it "unknown",
// spends one of the human's limiter tokens for a notifications verb, and
// answers any failed call through the one table (toolError), whatever
// added the tool; and it notes each method's outcome on the request's log
// line.
func (s *surface) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c, cerr := callerOf(req)
		var rec *requestRecord
		if cerr == nil {
			rec = c.rec
		}
		call, isCall := req.(*mcp.CallToolRequest)
		tool := ""
		if isCall && call.Params != nil {
			tool = call.Params.Name
			if _, known := verbFamily[tool]; !known {
				tool = ""
			}
		}
		rec.setCall(method, tool)
		if undeclared[method] {
			err := &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: "method not found: " + method + " (this server declares and serves tools only)"}
			rec.finish(err)
			return nil, err
		}
		if method != "tools/call" || !isCall || call.Params == nil {
			res, err := next(ctx, method, req)
			rec.finish(err)
			return res, err
		}
		name := call.Params.Name
		if cerr != nil {
			return toolError(rec, &handlerError{cerr}), nil
		}
		if fam, known := verbFamily[name]; known {
			if !slices.Contains(c.p.Grants, fam) {
				return toolError(rec, &handlerError{notifytype.Forbidden(
					"this endpoint's grant lacks the " + string(fam) + " verbs, so it may not call " + name)}), nil
			}
			if fam == notifytype.GrantNotifications {
				if wait, ok := s.d.Limiter.Take(hostid.Number(c.p.HumanID)); !ok {
					return toolError(rec, &handlerError{notifytype.RateLimitedFor("too many requests", wait)}), nil
				}
			}
		}
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError {
			cause := r.GetError()
			if cause == nil {
				cause = &handlerError{errors.New("the tool reported an error without a cause")}
			}
			return toolError(rec, cause), nil
		}
		rec.finish(err)
		return res, err
	}
}
