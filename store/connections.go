package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard/notify/notifytype"
)

// ErrConnectionNameTaken reports a connection name already used in its
// owner scope.
var ErrConnectionNameTaken = errors.New("a connection with this name exists in this owner scope")

// ErrConnectionInUse reports a connection that a sink or digest still
// references.
var ErrConnectionInUse = errors.New("connection is referenced by a sink or digest")

// Connection is a row of the connection vault (D18). Secret is the sealed
// value (nil when the connection has none); only the vault opens it.
type Connection struct {
	ID               int64
	Owner            notifytype.OwnerScope
	Kind             string
	Name             string
	AccountKey       string
	Secret           []byte
	CreatedAt        time.Time
	CreatedByHumanID string // "" when unknown
}

const connectionColumns = `id, owner, kind, name, account_key, secret, created_at, coalesce(created_by_human_id, '')`

func scanConnection(row pgx.Row) (Connection, error) {
	var (
		c     Connection
		owner string
	)
	if err := row.Scan(&c.ID, &owner, &c.Kind, &c.Name, &c.AccountKey, &c.Secret, &c.CreatedAt, &c.CreatedByHumanID); err != nil {
		return Connection{}, err
	}
	var err error
	if c.Owner, err = notifytype.ParseOwnerScope(owner); err != nil {
		return Connection{}, fmt.Errorf("error reading connection %d owner: %w", c.ID, err)
	}
	return c, nil
}

// InsertConnection inserts a connection without its secret (the secret is
// sealed with the row id, so it is set after, by SetConnectionSecret in the
// same transaction). It fills c.ID and c.CreatedAt.
func InsertConnection(ctx context.Context, db DBTX, c Connection) (Connection, error) {
	row := db.QueryRow(ctx, `INSERT INTO switchboard.connections (owner, kind, name, account_key, created_by_human_id)
		VALUES ($1, $2, $3, $4, NULLIF($5::text, '')) RETURNING `+connectionColumns,
		c.Owner.String(), c.Kind, c.Name, c.AccountKey, c.CreatedByHumanID)
	out, err := scanConnection(row)
	if isUniqueViolation(err, "connections_owner_name_key") {
		return Connection{}, ErrConnectionNameTaken
	}
	if err != nil {
		return Connection{}, fmt.Errorf("error inserting connection: %w", err)
	}
	return out, nil
}

// UpdateConnection sets a connection's name and base URL, returning it; a
// name already used in its owner scope is ErrConnectionNameTaken.
func UpdateConnection(ctx context.Context, db DBTX, id int64, name, accountKey string) (Connection, error) {
	out, err := scanConnection(db.QueryRow(ctx, `UPDATE switchboard.connections SET name = $2, account_key = $3
		WHERE id = $1 RETURNING `+connectionColumns, id, name, accountKey))
	if isUniqueViolation(err, "connections_owner_name_key") {
		return Connection{}, ErrConnectionNameTaken
	}
	if err != nil {
		return Connection{}, fmt.Errorf("error updating connection %d: %w", id, err)
	}
	return out, nil
}

// SetConnectionSecret stores a sealed secret on a connection row.
func SetConnectionSecret(ctx context.Context, db DBTX, id int64, sealed []byte) error {
	tag, err := db.Exec(ctx, `UPDATE switchboard.connections SET secret = $2 WHERE id = $1`, id, sealed)
	if err != nil {
		return fmt.Errorf("error storing connection secret: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("error storing connection secret: %w", pgx.ErrNoRows)
	}
	return nil
}

// GetConnection reads one connection by id, whatever its scope; the caller
// checks the scope. A missing row is pgx.ErrNoRows.
func GetConnection(ctx context.Context, db DBTX, id int64) (Connection, error) {
	c, err := scanConnection(db.QueryRow(ctx, `SELECT `+connectionColumns+` FROM switchboard.connections WHERE id = $1`, id))
	if err != nil {
		return Connection{}, fmt.Errorf("error reading connection: %w", err)
	}
	return c, nil
}

// ListConnections reads the connections of one owner scope, by name.
func ListConnections(ctx context.Context, db DBTX, owner notifytype.OwnerScope) ([]Connection, error) {
	rows, err := db.Query(ctx, `SELECT `+connectionColumns+` FROM switchboard.connections WHERE owner = $1 ORDER BY name, id`, owner.String())
	if err != nil {
		return nil, fmt.Errorf("error listing connections: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Connection, error) { return scanConnection(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing connections: %w", err)
	}
	return out, nil
}

// ConnectionInUse reports whether a sink or a digest references the
// connection.
func ConnectionInUse(ctx context.Context, db DBTX, id int64) (bool, error) {
	var used bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM switchboard.sinks WHERE connection_id = $1)
		OR EXISTS (SELECT 1 FROM switchboard.digests WHERE cairn_connection_id = $1)`, id).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("error checking connection use: %w", err)
	}
	return used, nil
}

// DeleteConnection deletes a connection. A connection still referenced is
// ErrConnectionInUse; a missing one is pgx.ErrNoRows.
func DeleteConnection(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM switchboard.connections WHERE id = $1`, id)
	if isForeignKeyViolation(err) {
		return ErrConnectionInUse
	}
	if err != nil {
		return fmt.Errorf("error deleting connection: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("error deleting connection: %w", pgx.ErrNoRows)
	}
	return nil
}

// LockOwnerScope takes a transaction-level advisory lock on an owner scope,
// so that count-then-insert ceilings (sinks per scope) hold under concurrent
// writers. db must be a transaction; the lock ends with it.
func LockOwnerScope(ctx context.Context, tx DBTX, owner notifytype.OwnerScope) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, LockFamilyOwner, owner.String()); err != nil {
		return fmt.Errorf("error locking owner scope: %w", err)
	}
	return nil
}

func isUniqueViolation(err error, constraint string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == constraint
}

// isForeignKeyViolation reports a foreign key violation, of one of
// constraints when any are named.
func isForeignKeyViolation(err error, constraints ...string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23503" &&
		(len(constraints) == 0 || slices.Contains(constraints, pg.ConstraintName))
}
