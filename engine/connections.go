package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/store"
)

// Connection and sink kinds.
const (
	KindGotify  = "gotify"
	KindApprise = "apprise"
	KindCairn   = "cairn"
)

// ConnectionKinds are the kinds a connection may have (D18); sinks use the
// first two, digests the third.
var ConnectionKinds = []string{KindGotify, KindApprise, KindCairn}

// NameMaxLen is the longest name a sink or connection may have, in
// characters.
const NameMaxLen = 64

// SecretMaxLen bounds a connection secret's plaintext, in bytes.
const SecretMaxLen = 8 << 10

// ConnectionInput is a connection as a human creates it.
type ConnectionInput struct {
	// Owner is the owner scope the connection belongs to. Required.
	Owner notifytype.OwnerScope

	// Kind is gotify, apprise or cairn. Required.
	Kind string

	// Name is unique in the owner scope: 1 to 64 printable characters.
	// Required.
	Name string

	// BaseURL is the server's base URL, "https://gotify.example.com":
	// HTTPS, or HTTP under the operator's PushAllowHTTP opt-in. Required.
	BaseURL string

	// Secret is what the server is reached with: a Gotify application
	// token, a Cairn bearer (both required), or for apprise the JSON
	// {"urls": [...], "authorization": "..."} that apprise.ParseSecret reads
	// (optional: a stateful sink behind no proxy needs none). It is sealed
	// with the operator key and never returned.
	Secret notifytype.Secret
}

// Connection is a connection as the service returns it: never its secret,
// only whether it has one (D18: secrets are write-only).
type Connection struct {
	ID               int64
	Owner            notifytype.OwnerScope
	Kind             string
	Name             string
	BaseURL          string
	HasSecret        bool
	CreatedAt        time.Time
	CreatedByHumanID string
}

func connectionOut(c store.Connection) Connection {
	return Connection{
		ID: c.ID, Owner: c.Owner, Kind: c.Kind, Name: c.Name, BaseURL: c.AccountKey,
		HasSecret: c.Secret != nil, CreatedAt: c.CreatedAt, CreatedByHumanID: c.CreatedByHumanID,
	}
}

func (e *Engine) vault() *vault.Vault { return e.vlt }

// CreateConnection validates and stores a connection with its secret sealed
// to the new row. Only a human creates connections (an endpoint gets
// forbidden, REQ-5). A refused Apprise scheme is forbidden_scheme; without an
// operator key a secret fails with encryption_required; either way nothing
// is stored.
func (e *Engine) CreateConnection(ctx context.Context, p Principal, in ConnectionInput) (Connection, error) {
	c, err := e.createConnection(ctx, p, in)
	return c, wrapErr(err, "creating connection")
}

func (e *Engine) createConnection(ctx context.Context, p Principal, in ConnectionInput) (Connection, error) {
	if err := rejectEndpoint(p, "create a connection"); err != nil {
		return Connection{}, err
	}
	if err := e.authorizeTarget(ctx, p, in.Owner); err != nil {
		return Connection{}, err
	}
	if !slices.Contains(ConnectionKinds, in.Kind) {
		return Connection{}, notifytype.InvalidArgument("kind", "must be gotify, apprise or cairn")
	}
	if err := checkName(in.Name); err != nil {
		return Connection{}, err
	}
	if err := e.checkBaseURL(in.BaseURL); err != nil {
		return Connection{}, err
	}
	plaintext, err := e.connectionSecret(in.Kind, in.Secret)
	if err != nil {
		return Connection{}, err
	}
	v := e.vault()
	if plaintext != "" && !v.Enabled() {
		return Connection{}, notifytype.EncryptionRequired()
	}

	var row store.Connection
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.InsertConnection(ctx, tx, store.Connection{
			Owner: in.Owner, Kind: in.Kind, Name: in.Name, AccountKey: in.BaseURL, CreatedByHumanID: p.HumanID,
		})
		if errors.Is(err, store.ErrConnectionNameTaken) {
			return notifytype.InvalidArgument("name", "a connection with this name already exists in this owner scope")
		}
		if err != nil {
			return err
		}
		if err := recordWrite(ctx, tx, p, row.Owner, writeConnectionCreate, objectConnection, row.ID); err != nil || plaintext == "" {
			return err
		}
		sealed, err := v.Seal(row.ID, row.Owner, notifytype.NewSecret(plaintext))
		if err != nil {
			return err
		}
		row.Secret = sealed
		return store.SetConnectionSecret(ctx, tx, row.ID, sealed)
	})
	if err != nil {
		return Connection{}, err
	}
	return connectionOut(row), nil
}

// checkBaseURL validates a base URL with the sinks' URL rule
// (sinks.CheckURL: absolute, https unless the operator allows http, no
// credentials, query or fragment).
func (e *Engine) checkBaseURL(base string) error {
	if base == "" {
		return notifytype.InvalidArgument("account_key", "the server's base URL is required")
	}
	if err := sinks.CheckURL(base, e.cfg.PushAllowHTTP); err != nil {
		return redacted(notifytype.InvalidArgument("account_key", err.Error()), "account_key", base)
	}
	return nil
}

// connectionSecret validates a connection's secret for its kind and returns
// the plaintext to seal ("" for none). No error repeats the secret.
func (e *Engine) connectionSecret(kind string, s notifytype.Secret) (string, error) {
	v := s.Reveal()
	if len(v) > SecretMaxLen {
		return "", notifytype.InvalidArgumentf("secret", "must be at most %d bytes", SecretMaxLen)
	}
	switch kind {
	case KindApprise:
		as, err := apprise.ParseSecret(v)
		if err != nil {
			return "", redacted(err, "secret", v)
		}
		if err := apprise.CheckSchemes(as.URLs, e.cfg.AppriseSchemesAllowed); err != nil {
			return "", redacted(err, "secret", v)
		}
		if as.IsZero() {
			return "", nil
		}
		return as.Encode(), nil
	default: // a Gotify application token or a Cairn bearer
		if v == "" {
			return "", notifytype.InvalidArgument("secret", "the "+kind+" token is required")
		}
		if strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || !utf8.ValidString(v) {
			return "", notifytype.InvalidArgument("secret", "a token is one line without spaces")
		}
		return v, nil
	}
}

// redacted returns err unless its text carries the secret, whole or any
// long word of it (a URL, a token), in which case it returns a refusal on
// field that says nothing of the value. The sinks' parsers promise never to
// repeat their input; this holds the promise at the service's boundary.
func redacted(err error, field, secret string) error {
	text := err.Error()
	leak := secret != "" && strings.Contains(text, secret)
	for _, word := range strings.FieldsFunc(secret, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`"',[]{}`, r)
	}) {
		leak = leak || len(word) >= redactWordMin && strings.Contains(text, word)
	}
	if !leak {
		return err
	}
	return notifytype.InvalidArgument(field, "is not valid")
}

// redactWordMin is the shortest word of a secret redacted checks for: long
// enough that the words of a refusal's own message ("authorization") do
// not count, short enough for any token or URL.
const redactWordMin = 16

// ListConnections lists an owner scope's connections, without secrets.
func (e *Engine) ListConnections(ctx context.Context, p Principal, scope notifytype.OwnerScope) ([]Connection, error) {
	if err := e.authorize(ctx, p, scope, false); err != nil {
		return nil, err
	}
	rows, err := store.ListConnections(ctx, e.cfg.Pool, scope)
	if err != nil {
		return nil, wrapErr(err, "listing connections")
	}
	out := make([]Connection, len(rows))
	for i, r := range rows {
		out[i] = connectionOut(r)
	}
	return out, nil
}

// DeleteConnection deletes a connection no sink or digest uses; one still
// used is refused with invalid_argument on field connection. Only a human
// deletes connections.
func (e *Engine) DeleteConnection(ctx context.Context, p Principal, id int64) error {
	return wrapErr(e.deleteConnection(ctx, p, id), "deleting connection")
}

func (e *Engine) deleteConnection(ctx context.Context, p Principal, id int64) error {
	if err := rejectEndpoint(p, "delete a connection"); err != nil {
		return err
	}
	c, err := store.GetConnection(ctx, e.cfg.Pool, id)
	if err != nil {
		return notFoundIfNoRows(err, "connection")
	}
	if err := e.authorizeResource(ctx, p, c.Owner, true, "connection"); err != nil {
		return err
	}
	inUse := notifytype.InvalidArgument("connection", "a sink or digest still uses this connection; delete or change it first")
	return pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		used, err := store.ConnectionInUse(ctx, tx, id)
		if err != nil {
			return err
		}
		if used {
			return inUse
		}
		err = store.DeleteConnection(ctx, tx, id)
		if errors.Is(err, store.ErrConnectionInUse) {
			return inUse
		}
		if err != nil {
			return notFoundIfNoRows(err, "connection")
		}
		return recordWrite(ctx, tx, p, c.Owner, writeConnectionDelete, objectConnection, id)
	})
}

// connectionFor reads the connection a sink of scope and kind uses, checking
// both on every use (REQ-2). A connection missing, of another scope or of
// another kind is forbidden, the same refusal for all three, so that it
// reveals nothing of another scope (IsConnectionRefusal finds it).
func connectionFor(ctx context.Context, db store.DBTX, id int64, scope notifytype.OwnerScope, kind string) (store.Connection, error) {
	c, err := store.GetConnection(ctx, db, id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Connection{}, err
	}
	if err != nil || c.Owner != scope || c.Kind != kind {
		// Field names the input, so a form can say it under Connection.
		return store.Connection{}, &connectionRefusal{&notifytype.Error{Code: notifytype.CodeForbidden, Field: "connection_id",
			Message: fmt.Sprintf("the connection must be of kind %s and of the same owner scope", kind)}}
	}
	return c, nil
}

// openConnection reads a connection for a sink of scope and kind, as
// connectionFor, and opens its secret (zero when it has none). Delivery
// calls it on every use.
func (e *Engine) openConnection(ctx context.Context, db store.DBTX, id int64, scope notifytype.OwnerScope, kind string) (store.Connection, notifytype.Secret, error) {
	c, err := connectionFor(ctx, db, id, scope, kind)
	if err != nil {
		return store.Connection{}, notifytype.Secret{}, err
	}
	if c.Secret == nil {
		return c, notifytype.Secret{}, nil
	}
	secret, err := e.vault().Open(c.ID, c.Owner, c.Secret)
	if err != nil {
		return store.Connection{}, notifytype.Secret{}, fmt.Errorf("error opening connection %d secret: %w", c.ID, err)
	}
	return c, secret, nil
}

// CheckName validates the name of a sink, a connection or an endpoint (an
// embedder's own named objects may use it too): 1 to NameMaxLen printable
// UTF-8 characters (no NUL, control character or bidi override), without
// surrounding space; else invalid_argument on field name.
func CheckName(name string) error { return checkName(name) }

func checkName(name string) error {
	switch {
	case name == "":
		return notifytype.InvalidArgument("name", "is required")
	case !utf8.ValidString(name):
		return notifytype.InvalidArgument("name", "must be UTF-8 text")
	case utf8.RuneCountInString(name) > NameMaxLen:
		return notifytype.InvalidArgumentf("name", "must be at most %d characters", NameMaxLen)
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return notifytype.InvalidArgument("name", "must be printable characters only")
	case strings.TrimSpace(name) != name:
		return notifytype.InvalidArgument("name", "must not begin or end with a space")
	}
	return nil
}
