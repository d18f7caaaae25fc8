package httpx

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// SessionCookie is the web UI's session cookie.
const SessionCookie = "sb_session"

// Auth resolves credentials to principals.
type Auth struct {
	Accounts  *host.Accounts
	Endpoints *host.Endpoints
	Clock     engine.Clock
	// Failures limits failed bearer tokens per client address: Human and
	// Endpoint answer a *TooManyFailures (429) while it is spent, and
	// spend it on each bearer token they cannot resolve (a request with no
	// token guesses nothing and spends nothing). Nil limits nothing.
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
	if err := a.Failures.Check(r); err != nil {
		return engine.Principal{}, err
	}
	tok := Bearer(r)
	if tok == "" {
		return engine.Principal{}, errUnauthenticated // no guess made: nothing spent
	}
	if !strings.HasPrefix(tok, host.APITokenPrefix) {
		a.Failures.Fail(r)
		return engine.Principal{}, errUnauthenticated
	}
	h, err := a.Accounts.HumanByAPIToken(ctx, tok)
	if errors.Is(err, notifytype.ErrNotFound) {
		a.Failures.Fail(r)
		return engine.Principal{}, errUnauthenticated
	}
	if err != nil {
		return engine.Principal{}, err
	}
	return engine.HumanPrincipal(h.ID), nil
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
	return engine.HumanPrincipal(h.ID), nil
}

// Endpoint resolves an endpoint's vended bearer credential.
func (a *Auth) Endpoint(ctx context.Context, r *http.Request) (engine.Principal, host.Endpoint, error) {
	if err := a.Failures.Check(r); err != nil {
		return engine.Principal{}, host.Endpoint{}, err
	}
	tok := Bearer(r)
	if tok == "" {
		return engine.Principal{}, host.Endpoint{}, errUnauthenticated
	}
	p, e, err := a.Endpoints.Authenticate(ctx, tok)
	if errors.Is(err, notifytype.ErrNotFound) {
		a.Failures.Fail(r)
		return engine.Principal{}, host.Endpoint{}, errUnauthenticated
	}
	return p, e, err
}
