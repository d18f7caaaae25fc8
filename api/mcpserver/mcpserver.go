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
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// ServerName is the name the server gives in its implementation info.
const ServerName = "switchboard-notify"

// Version is the version the server gives in its implementation info.
const Version = "1.0.0"

// instructions is what the server tells a client about itself.
const instructions = "Switchboard Notify for one agent endpoint. The tools listed are the verb families " +
	"this endpoint's owner granted it: todos (claim, heartbeat, complete, fail), notifications " +
	"(list_sinks, set_sink, delete_sink, test_sink, set_sink_subscriptions; in the endpoint's owner " +
	"scope, using existing connections only) and notify_owner (page the owner, 5 an hour). " +
	"A refusal comes back as a tool error with structured content {code, field, scheme, message}."

// caller is who a request acts as: the endpoint its credential names.
type caller struct {
	p engine.Principal
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
	s := &surface{d: d, log: d.Logger, servers: map[string]*mcp.Server{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	h := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              s.log,
		MaxRequestBodyBytes: httpx.MaxBody,
		// The SDK's DNS-rebinding guard refuses a request that reached a
		// loopback address under another Host, which is every request from
		// a reverse proxy on the same machine. It protects servers without
		// credentials; here authenticate answers 401 before the SDK sees a
		// request, and a rebinding page cannot hold an endpoint credential.
		DisableLocalhostProtection: true,
	})
	// The SDK's bearer middleware is what puts a TokenInfo where tool calls
	// see it; authenticate has already checked the credential.
	withToken := auth.RequireBearerToken(tokenInfo, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return httpx.Headers(s.authenticate(withToken(h)))
}

// authenticate resolves the request's bearer credential to its endpoint,
// answering 401 with WWW-Authenticate for a missing, unknown or revoked
// one, on every request.
func (s *surface) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _, err := s.d.Auth.Endpoint(r.Context(), r)
		switch {
		case httpx.IsUnauthenticated(err):
			httpx.WriteUnauthenticated(w, "a valid endpoint credential is required as a bearer token")
			return
		case err != nil:
			httpx.WriteError(w, r, s.log, err)
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, &caller{p: p})
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

// callerOf returns who a tool call acts as.
func callerOf(req *mcp.CallToolRequest) (*caller, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if c, ok := req.Extra.TokenInfo.Extra[tokenExtraCaller].(*caller); ok {
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
			Instructions: instructions,
			Logger:       s.log,
			// The tools of a server never change: an endpoint's grant picks
			// another server instead.
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

// guard wraps tools/call: a verb outside the caller's grant is refused as
// forbidden before the SDK could call it "unknown"; a notifications verb
// spends one of the human's limiter tokens; and a failed call's error is
// answered through the one table (toolError).
func (s *surface) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		name := call.Params.Name
		c, err := callerOf(call)
		if err != nil {
			return toolError(ctx, s.log, name, 0, &handlerError{err}), nil
		}
		if fam, known := verbFamily[name]; known {
			if !slices.Contains(c.p.Grants, fam) {
				return toolError(ctx, s.log, name, c.p.EndpointID, &handlerError{notifytype.Forbidden(
					"this endpoint's grant lacks the " + string(fam) + " verbs, so it may not call " + name)}), nil
			}
			if fam == notifytype.GrantNotifications && !s.d.Limiter.Allow(c.p.HumanID) {
				return toolError(ctx, s.log, name, c.p.EndpointID, &handlerError{notifytype.RateLimited("too many requests; slow down")}), nil
			}
		}
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.GetError() != nil {
			return toolError(ctx, s.log, name, c.p.EndpointID, r.GetError()), nil
		}
		return res, err
	}
}

// handle adapts a verb to the SDK: it finds the caller and marks the verb's
// errors as its own, for guard to answer through the table.
func handle[In, Out any](fn func(context.Context, *caller, In) (Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		c, err := callerOf(req)
		if err != nil {
			return nil, zero, &handlerError{err}
		}
		out, err := fn(ctx, c, in)
		if err != nil {
			return nil, zero, &handlerError{err}
		}
		return nil, out, nil
	}
}
