package httpx

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// SessionCookie is the web UI's session cookie.
const SessionCookie = "sb_session"

// Auth resolves credentials to principals.
type Auth struct {
	Accounts  *host.Accounts
	Endpoints *host.Endpoints
	Clock     clocks.Clock
	// Failures limits failed bearer tokens per client address and per
	// token: Human and Endpoint spend both on each bearer token they
	// cannot resolve, and answer that failure a *TooManyFailures (429)
	// when either was spent; a token that resolves is served whatever its
	// address failed (a request with no token guesses nothing and spends
	// nothing). Nil limits nothing.
	Failures *AuthFailures
}

// errUnauthenticated is answered 401 by the surfaces.
var errUnauthenticated = errors.New("unauthenticated")

// IsUnauthenticated reports whether err means "no valid credential".
func IsUnauthenticated(err error) bool { return errors.Is(err, errUnauthenticated) }

// Bearer returns the request's bearer token, "" when it has none.
func Bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// Human resolves an operator API bearer token to the human acting.
func (a *Auth) Human(ctx context.Context, r *http.Request) (engine.Principal, error) {
	tok := Bearer(r)
	if tok == "" {
		return engine.Principal{}, errUnauthenticated // no guess made: nothing spent
	}
	cred := CredentialKey("token", tok)
	if err := a.Failures.Spent(cred); err != nil {
		return engine.Principal{}, err
	}
	if !strings.HasPrefix(tok, host.APITokenPrefix) {
		return engine.Principal{}, a.failed(r, cred)
	}
	h, err := a.Accounts.HumanByAPIToken(ctx, tok)
	if errors.Is(err, notifytype.ErrNotFound) {
		return engine.Principal{}, a.failed(r, cred)
	}
	if err != nil {
		return engine.Principal{}, err
	}
	Authenticated(r.Context())
	return engine.HumanPrincipal(hostid.String(h.ID)), nil
}

// failed spends a failure of r's address and of cred: the answer is
// unauthenticated, or a *TooManyFailures when either was spent.
func (a *Auth) failed(r *http.Request, cred string) error {
	if err := a.Failures.Fail(r, cred); err != nil {
		return err
	}
	return errUnauthenticated
}

// Session resolves the web session cookie to the human acting.
func (a *Auth) Session(ctx context.Context, r *http.Request) (engine.Principal, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || !strings.HasPrefix(c.Value, host.SessionPrefix) {
		return engine.Principal{}, errUnauthenticated
	}
	h, err := a.Accounts.HumanBySession(ctx, c.Value, a.Clock.Now())
	if errors.Is(err, notifytype.ErrNotFound) {
		return engine.Principal{}, errUnauthenticated
	}
	if err != nil {
		return engine.Principal{}, err
	}
	Authenticated(r.Context())
	return engine.HumanPrincipal(hostid.String(h.ID)), nil
}

// Endpoint resolves an endpoint's vended bearer credential.
func (a *Auth) Endpoint(ctx context.Context, r *http.Request) (engine.Principal, host.Endpoint, error) {
	tok := Bearer(r)
	if tok == "" {
		return engine.Principal{}, host.Endpoint{}, errUnauthenticated
	}
	cred := CredentialKey("token", tok)
	if err := a.Failures.Spent(cred); err != nil {
		return engine.Principal{}, host.Endpoint{}, err
	}
	p, e, err := a.Endpoints.Authenticate(ctx, tok)
	if errors.Is(err, notifytype.ErrNotFound) {
		return engine.Principal{}, host.Endpoint{}, a.failed(r, cred)
	}
	if err == nil {
		Authenticated(r.Context())
	}
	return p, e, err
}
