package engine

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// ConnectionPatch is a change to a connection; nil fields stay as they
// are. Its kind and owner scope never change.
type ConnectionPatch struct {
	Name    *string
	BaseURL *string
	// Secret replaces the secret, validated for the connection's kind as
	// on create, and sealed; nil keeps the sealed one (a form's blank
	// secret fields). The old secret is never read back.
	Secret *notifytype.Secret
}

// UpdateConnection renames a connection, changes its base URL or replaces
// its secret (issue 25: a typo no longer means a new connection). Only a
// human with write access to its scope may; the sinks and digests on it
// use the new values from their next delivery. Nothing is stored on a
// refusal.
func (e *Engine) UpdateConnection(ctx context.Context, p Principal, id int64, patch ConnectionPatch) (Connection, error) {
	c, err := e.updateConnection(ctx, p, id, patch)
	return c, wrapErr(err, "updating connection")
}

func (e *Engine) updateConnection(ctx context.Context, p Principal, id int64, patch ConnectionPatch) (Connection, error) {
	if err := rejectEndpoint(p, "change a connection"); err != nil {
		return Connection{}, err
	}
	cur, err := store.GetConnection(ctx, e.cfg.Pool, id)
	if err != nil {
		return Connection{}, notFoundIfNoRows(err, "connection")
	}
	if err := e.authorizeResource(ctx, p, cur.Owner, true, "connection"); err != nil {
		return Connection{}, err
	}
	name, base := cur.Name, cur.AccountKey
	if patch.Name != nil {
		name = *patch.Name
	}
	if patch.BaseURL != nil {
		base = *patch.BaseURL
	}
	if err := checkName(name); err != nil {
		return Connection{}, err
	}
	if err := e.checkBaseURL(base); err != nil {
		return Connection{}, err
	}
	var plaintext string
	if patch.Secret != nil {
		if plaintext, err = e.connectionSecret(cur.Kind, *patch.Secret); err != nil {
			return Connection{}, err
		}
		if plaintext != "" && !e.vault().Enabled() {
			return Connection{}, notifytype.EncryptionRequired()
		}
	}
	var row store.Connection
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		row, err = store.UpdateConnection(ctx, tx, id, name, base)
		if errors.Is(err, store.ErrConnectionNameTaken) {
			return notifytype.InvalidArgument("name", "a connection with this name already exists in this owner scope")
		}
		if err != nil {
			return notFoundIfNoRows(err, "connection")
		}
		if row.Owner != cur.Owner || row.Kind != cur.Kind {
			return notifytype.NotFound("connection") // replaced meanwhile
		}
		if err := recordWrite(ctx, tx, p, row.Owner, writeConnectionUpdate, objectConnection, row.ID); err != nil {
			return err
		}
		if patch.Secret == nil {
			return nil
		}
		var sealed []byte
		if plaintext != "" {
			if sealed, err = e.vault().Seal(row.ID, row.Owner, notifytype.NewSecret(plaintext)); err != nil {
				return err
			}
		}
		row.Secret = sealed
		return store.SetConnectionSecret(ctx, tx, row.ID, sealed)
	})
	if err != nil {
		return Connection{}, err
	}
	return connectionOut(row), nil
}
