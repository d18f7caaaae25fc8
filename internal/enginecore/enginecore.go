// Package enginecore is what the engine's feature packages (engine/digests,
// ...) reach of an *engine.Engine beyond its exported API: its pool, its
// permission checks, its connections, its clock and its supervision tree.
// Package engine fills a Core for each engine it makes and answers Of.
// Nothing outside this module can import it, so the engine's exported
// surface stays the embedder's lean one while the product features built
// on it live in packages of their own.
package enginecore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Principal has engine.Principal's fields, in order, so that each converts
// to the other (enginecore.Principal(p)): a field added to one and not the
// other stops the build.
type Principal struct {
	HumanID       string
	EndpointID    int64
	EndpointScope notifytype.OwnerScope
	Grants        []notifytype.Grant
}

// Service is a long-running part run under the engine's supervision tree,
// from Start to Stop, as the engine's own are (a suture.Service).
type Service interface {
	Serve(ctx context.Context) error
	String() string
}

// Core is one engine's inside, for its feature packages.
type Core struct {
	Pool    *pgxpool.Pool
	Logger  *slog.Logger
	BaseURL string
	// Client is the guarded client every delivery goes through.
	Client *http.Client

	// Authorize, AuthorizeTarget and AuthorizeResource are the engine's
	// one permission check (see engine's authorize): on a scope, on the
	// scope a create names, and on a resource read from the store.
	Authorize         func(ctx context.Context, p Principal, scope notifytype.OwnerScope, write bool) error
	AuthorizeTarget   func(ctx context.Context, p Principal, scope notifytype.OwnerScope) error
	AuthorizeResource func(ctx context.Context, p Principal, scope notifytype.OwnerScope, write bool, what string) error

	// CheckEndpointMember refuses an endpoint of a team whose accountable
	// human is no longer a member of it.
	CheckEndpointMember func(ctx context.Context, p Principal) error

	// Owned is the Directory's Owned: which of ids are objects of kind
	// (an engine.Resource: "queue", "todo", ...) in scope.
	Owned func(ctx context.Context, scope notifytype.OwnerScope, kind string, ids []int64) ([]int64, error)

	// PrivateHosts is Config.PrivateHosts, the operator's allowlist of
	// private addresses.
	PrivateHosts []netip.Prefix

	// ConnectionFor reads the connection of scope and kind id names, with
	// the engine's one refusal for a connection missing, of another scope
	// or of another kind (engine.IsConnectionRefusal finds it);
	// OpenConnection also opens its secret.
	ConnectionFor  func(ctx context.Context, db store.DBTX, id int64, scope notifytype.OwnerScope, kind string) (store.Connection, error)
	OpenConnection func(ctx context.Context, db store.DBTX, id int64, scope notifytype.OwnerScope, kind string) (store.Connection, notifytype.Secret, error)

	// Now is the database's time (a test's stand-in clock's when one is
	// set); NowOrLocal falls back to the local clock on an error.
	Now        func(ctx context.Context) (time.Time, error)
	NowOrLocal func(ctx context.Context) time.Time

	// AdapterFor builds the adapter a delivery to s goes through (with
	// the sink's connection opened), or says why s may not be sent to;
	// Send sends msg through it, as every delivery does (a panicking
	// adapter is an abandoned attempt).
	AdapterFor func(s store.SinkForDelivery) (sinks.Adapter, string)
	Send       func(ctx context.Context, a sinks.Adapter, msg sinks.Message) sinks.Result

	// StatementNow is the instant a statement that takes the database's
	// now() when given zero is given: zero in production, a test's
	// stand-in clock's time when one is set.
	StatementNow func() time.Time

	// DigestLink is Config.Links.Digest, ItemLink Config.Links.Item (kind
	// an engine.Resource), each "" for none; LinkText is Config.Links.Text.
	DigestLink func(owner notifytype.OwnerScope, digestID int64) string
	ItemLink   func(owner notifytype.OwnerScope, kind string, id int64) string
	LinkText   string

	// AddService runs svc under the engine's supervision tree: from Start
	// when the engine has not started yet, at once when it runs.
	AddService func(svc Service)
}

// AgentPageWindow is how long an agent's page counts against its hourly
// limit (pages.NotifyOwner); the engine's janitor removes older ones.
const AgentPageWindow = time.Hour

// Of returns e's Core (e an *engine.Engine). Package engine sets it.
var Of func(e any) *Core

// RecordWrite records in the write log that p wrote (action) the object of
// kind and id in owner's scope, in the write's own transaction db.
func RecordWrite(ctx context.Context, db store.DBTX, p Principal, owner notifytype.OwnerScope, action, objectKind string, objectID int64) error {
	return store.InsertWrite(ctx, db, store.Write{
		Owner: owner.String(), Action: action, ObjectKind: objectKind, ObjectID: objectID,
		HumanID: p.HumanID, EndpointID: p.EndpointID,
	})
}

// WrapErr wraps an error that is not already a notifytype.Error with what
// was being done.
func WrapErr(err error, doing string) error {
	if err == nil {
		return nil
	}
	if _, ok := notifytype.AsError(err); ok {
		return err
	}
	return fmt.Errorf("error %s: %w", doing, err)
}

// NotFoundIfNoRows turns a missing row into not_found for what.
func NotFoundIfNoRows(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notifytype.NotFound(what)
	}
	return err
}
