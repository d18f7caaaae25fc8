package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/notifytype"
)

// EndpointCredentialPrefix marks an endpoint's vended bearer credential.
const EndpointCredentialPrefix = "sbe_"

// SessionPrefix marks a web session cookie's value.
const SessionPrefix = "sbs_"

// SessionTTL is how long a web session lasts.
const SessionTTL = 12 * time.Hour

// The host's writes in the write log (history.RecordWrite).
const (
	WriteEndpointVend   = "endpoint.vend"
	WriteEndpointRevoke = "endpoint.revoke"
	// ObjectEndpoint is the object kind of an endpoint in the write log;
	// the engine records an endpoint's agent pages under it too.
	ObjectEndpoint = "endpoint"
)

// Endpoints vends, lists, revokes and authenticates endpoints: agents'
// credentials carrying a grant of verb families and a human accountable for
// them (D4, D5).
type Endpoints struct {
	pool  *pgxpool.Pool
	dir   engine.Directory
	todos *Todos
	clock clocks.Clock
}

// NewEndpoints returns the endpoints kept in pool's database; revoking one
// dead-letters its claimed todos through todos.
func NewEndpoints(pool *pgxpool.Pool, dir engine.Directory, todos *Todos, clock clocks.Clock) *Endpoints {
	if clock == nil {
		clock = clocks.System{}
	}
	return &Endpoints{pool: pool, dir: dir, todos: todos, clock: clock}
}

// Endpoint is an endpoint as surfaces show it: never its credential.
type Endpoint struct {
	ID                 int64                 `json:"id"`
	Owner              notifytype.OwnerScope `json:"owner"`
	Name               string                `json:"name"`
	AccountableHumanID int64                 `json:"accountable_human_id"`
	Grants             []notifytype.Grant    `json:"grants"`
	CreatedAt          time.Time             `json:"created_at"`
	RevokedAt          *time.Time            `json:"revoked_at,omitempty"`
}

func endpointOut(e hoststore.Endpoint) Endpoint {
	owner, _ := notifytype.ParseOwnerScope(e.Owner)
	grants := make([]notifytype.Grant, len(e.Grants))
	for i, g := range e.Grants {
		grants[i] = notifytype.Grant(g)
	}
	return Endpoint{ID: e.ID, Owner: owner, Name: e.Name, AccountableHumanID: e.AccountableHumanID,
		Grants: grants, CreatedAt: e.CreatedAt, RevokedAt: e.RevokedAt}
}

// mayManage says whether human may vend and revoke endpoints of scope: their
// own scope, or a team they own or administer. Another scope is not_found.
func (s *Endpoints) mayManage(ctx context.Context, humanID int64, scope notifytype.OwnerScope) error {
	switch {
	case scope == hostid.Human(humanID):
		return nil
	case scope.Kind == notifytype.ScopeTeam:
		role, err := s.dir.TeamRole(ctx, hostid.String(humanID), scope.ID)
		if err != nil {
			return err
		}
		if role == engine.RoleNone {
			return notifytype.NotFound("owner scope")
		}
		if !role.CanConfigure() {
			return notifytype.Forbidden("only a team owner or admin may manage the team's endpoints")
		}
		return nil
	}
	return notifytype.NotFound("owner scope")
}

// Vend creates an endpoint of scope, accountable to humanID, with grants
// (the basics, todos and rules, when none are given), and returns its
// credential once.
func (s *Endpoints) Vend(ctx context.Context, humanID int64, scope notifytype.OwnerScope, name string, grants []notifytype.Grant) (Endpoint, notifytype.Secret, error) {
	name = strings.TrimSpace(name)
	if !scope.Valid() {
		return Endpoint{}, notifytype.Secret{}, notifytype.InvalidArgument("owner", "must be human:<id> or team:<id>")
	}
	// Checked like sink and connection names: a NUL byte would fail in
	// the database, and control characters and bidi overrides would be
	// shown to humans.
	if err := engine.CheckName(name); err != nil {
		return Endpoint{}, notifytype.Secret{}, err
	}
	if grants == nil {
		grants = notifytype.DefaultGrants
	}
	names := make([]string, 0, len(grants))
	for _, g := range grants {
		if !g.Valid() {
			return Endpoint{}, notifytype.Secret{}, notifytype.InvalidArgumentf("grants", "unknown verb family %q", g)
		}
		if !slices.Contains(names, string(g)) {
			names = append(names, string(g))
		}
	}
	if err := s.mayManage(ctx, humanID, scope); err != nil {
		return Endpoint{}, notifytype.Secret{}, err
	}
	secret, hash, err := mint(EndpointCredentialPrefix)
	if err != nil {
		return Endpoint{}, notifytype.Secret{}, err
	}
	var e hoststore.Endpoint
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		e, err = hoststore.InsertEndpoint(ctx, tx, hoststore.Endpoint{
			Owner: scope.String(), Name: name, AccountableHumanID: humanID, Grants: names,
		}, hash)
		if err != nil {
			return err
		}
		return history.RecordWrite(ctx, tx, engine.HumanPrincipal(hostid.String(humanID)), scope, WriteEndpointVend, ObjectEndpoint, e.ID)
	})
	if errors.Is(err, hoststore.ErrEndpointNameTaken) {
		return Endpoint{}, notifytype.Secret{}, notifytype.InvalidArgument("name", "an endpoint of this name exists in this owner scope")
	}
	if err != nil {
		return Endpoint{}, notifytype.Secret{}, err
	}
	return endpointOut(e), secret, nil
}

// List lists scope's endpoints for a human who may see them.
func (s *Endpoints) List(ctx context.Context, humanID int64, scope notifytype.OwnerScope) ([]Endpoint, error) {
	if scope.Kind == notifytype.ScopeTeam {
		role, err := s.dir.TeamRole(ctx, hostid.String(humanID), scope.ID)
		if err != nil {
			return nil, err
		}
		if role == engine.RoleNone {
			return nil, notifytype.NotFound("owner scope")
		}
	} else if scope != hostid.Human(humanID) {
		return nil, notifytype.NotFound("owner scope")
	}
	rows, err := hoststore.ListEndpoints(ctx, s.pool, scope.String())
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, len(rows))
	for i, r := range rows {
		out[i] = endpointOut(r)
	}
	return out, nil
}

// Revoke revokes an endpoint: its credential stops working and every todo
// it has claimed dead-letters (D15).
func (s *Endpoints) Revoke(ctx context.Context, humanID, endpointID int64) error {
	e, err := hoststore.GetEndpoint(ctx, s.pool, endpointID)
	if errors.Is(err, pgx.ErrNoRows) {
		return notifytype.NotFound("endpoint")
	}
	if err != nil {
		return err
	}
	scope, _ := notifytype.ParseOwnerScope(e.Owner)
	if err := s.mayManage(ctx, humanID, scope); err != nil {
		if errors.Is(err, notifytype.ErrNotFound) {
			return notifytype.NotFound("endpoint")
		}
		return err
	}
	return s.todos.revokeEndpoint(ctx, endpointID, func(tx pgx.Tx) error {
		return history.RecordWrite(ctx, tx, engine.HumanPrincipal(hostid.String(humanID)), scope, WriteEndpointRevoke, ObjectEndpoint, endpointID)
	})
}

// Authenticate resolves an endpoint's bearer credential to the principal
// it acts as. An unknown or revoked credential is not_found.
func (s *Endpoints) Authenticate(ctx context.Context, credential string) (engine.Principal, Endpoint, error) {
	if !strings.HasPrefix(credential, EndpointCredentialPrefix) {
		return engine.Principal{}, Endpoint{}, notifytype.NotFound("endpoint")
	}
	e, err := hoststore.EndpointByCredentialHash(ctx, s.pool, HashToken(credential))
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Principal{}, Endpoint{}, notifytype.NotFound("endpoint")
	}
	if err != nil {
		return engine.Principal{}, Endpoint{}, err
	}
	out := endpointOut(e)
	// A team endpoint acts with its accountable human's role in the team,
	// checked at every use: once the human has left the team, the
	// credential stops working, whatever verb it calls.
	if out.Owner.Kind == notifytype.ScopeTeam {
		role, err := s.dir.TeamRole(ctx, hostid.String(e.AccountableHumanID), out.Owner.ID)
		if err != nil {
			return engine.Principal{}, Endpoint{}, err
		}
		if role == engine.RoleNone {
			return engine.Principal{}, Endpoint{}, notifytype.NotFound("endpoint")
		}
	}
	return engine.EndpointPrincipal(e.ID, hostid.String(e.AccountableHumanID), out.Owner, out.Grants...), out, nil
}

// StartSession spends a one-time login link and returns a new session's
// cookie value, once, and when it expires.
func (a *Accounts) StartSession(ctx context.Context, loginToken string, now time.Time) (Human, notifytype.Secret, time.Time, error) {
	h, err := a.UseLoginLink(ctx, loginToken)
	if err != nil {
		return Human{}, notifytype.Secret{}, time.Time{}, err
	}
	secret, hash, err := mint(SessionPrefix)
	if err != nil {
		return Human{}, notifytype.Secret{}, time.Time{}, err
	}
	expires := now.Add(SessionTTL)
	if err := hoststore.InsertSession(ctx, a.pool, h.ID, hash, expires); err != nil {
		return Human{}, notifytype.Secret{}, time.Time{}, err
	}
	return h, secret, expires, nil
}

// HumanBySession resolves a session cookie's value to its human.
func (a *Accounts) HumanBySession(ctx context.Context, session string, now time.Time) (Human, error) {
	h, err := hoststore.HumanBySession(ctx, a.pool, HashToken(session), now)
	if errors.Is(err, pgx.ErrNoRows) {
		return Human{}, notifytype.NotFound("session")
	}
	return h, err
}

// EndSession logs a session out.
func (a *Accounts) EndSession(ctx context.Context, session string) error {
	return hoststore.DeleteSession(ctx, a.pool, HashToken(session))
}
