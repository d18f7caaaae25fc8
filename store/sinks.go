package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
)

// ErrSinkNameTaken reports a sink name already used in its owner scope.
var ErrSinkNameTaken = errors.New("a sink with this name exists in this owner scope")

// Sink is a row of sinks (REQ-2). Options is the normalised per-kind JSON.
// UpdatedByHumanID and UpdatedByEndpointID record the last writer (0 for
// none).
type Sink struct {
	ID                  int64
	Owner               notifytype.OwnerScope
	Name                string
	Kind                string
	ConnectionID        int64
	Enabled             bool
	Options             []byte
	BudgetPerHour       int
	BudgetBurst         int
	CreatedAt           time.Time
	UpdatedAt           time.Time
	UpdatedByHumanID    string
	UpdatedByEndpointID int64
}

const sinkColumns = `id, owner, name, kind, connection_id, enabled, options, budget_per_hour, budget_burst,
	created_at, updated_at, coalesce(updated_by_human_id, ''), coalesce(updated_by_endpoint_id, 0)`

func scanSink(row pgx.Row) (Sink, error) {
	var (
		s     Sink
		owner string
	)
	if err := row.Scan(&s.ID, &owner, &s.Name, &s.Kind, &s.ConnectionID, &s.Enabled, &s.Options,
		&s.BudgetPerHour, &s.BudgetBurst, &s.CreatedAt, &s.UpdatedAt, &s.UpdatedByHumanID, &s.UpdatedByEndpointID); err != nil {
		return Sink{}, err
	}
	var err error
	if s.Owner, err = notifytype.ParseOwnerScope(owner); err != nil {
		return Sink{}, fmt.Errorf("error reading sink %d owner: %w", s.ID, err)
	}
	return s, nil
}

// CountSinks counts the sinks of one owner scope.
func CountSinks(ctx context.Context, db DBTX, owner notifytype.OwnerScope) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM switchboard.sinks WHERE owner = $1`, owner.String()).Scan(&n); err != nil {
		return 0, fmt.Errorf("error counting sinks: %w", err)
	}
	return n, nil
}

// InsertSink inserts a sink; ID and the timestamps are ignored and filled
// in. A duplicate name in the scope is ErrSinkNameTaken.
func InsertSink(ctx context.Context, db DBTX, s Sink) (Sink, error) {
	out, err := scanSink(db.QueryRow(ctx, `INSERT INTO switchboard.sinks (owner, name, kind, connection_id, enabled, options,
			budget_per_hour, budget_burst, updated_by_human_id, updated_by_endpoint_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9::text, ''), NULLIF($10::bigint, 0)) RETURNING `+sinkColumns,
		s.Owner.String(), s.Name, s.Kind, s.ConnectionID, s.Enabled, s.Options,
		s.BudgetPerHour, s.BudgetBurst, s.UpdatedByHumanID, s.UpdatedByEndpointID))
	if isUniqueViolation(err, "sinks_owner_name_key") {
		return Sink{}, ErrSinkNameTaken
	}
	if err != nil {
		return Sink{}, fmt.Errorf("error inserting sink: %w", err)
	}
	return out, nil
}

// GetSink reads one sink by id, whatever its scope; the caller checks the
// scope. A missing row is pgx.ErrNoRows.
func GetSink(ctx context.Context, db DBTX, id int64) (Sink, error) {
	s, err := scanSink(db.QueryRow(ctx, `SELECT `+sinkColumns+` FROM switchboard.sinks WHERE id = $1`, id))
	if err != nil {
		return Sink{}, fmt.Errorf("error reading sink: %w", err)
	}
	return s, nil
}

// GetSinkForUpdate reads one sink and locks its row until tx ends.
func GetSinkForUpdate(ctx context.Context, tx DBTX, id int64) (Sink, error) {
	s, err := scanSink(tx.QueryRow(ctx, `SELECT `+sinkColumns+` FROM switchboard.sinks WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return Sink{}, fmt.Errorf("error reading sink: %w", err)
	}
	return s, nil
}

// ListSinks reads the sinks of one owner scope, by name.
func ListSinks(ctx context.Context, db DBTX, owner notifytype.OwnerScope) ([]Sink, error) {
	rows, err := db.Query(ctx, `SELECT `+sinkColumns+` FROM switchboard.sinks WHERE owner = $1 ORDER BY name, id`, owner.String())
	if err != nil {
		return nil, fmt.Errorf("error listing sinks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Sink, error) { return scanSink(r) })
	if err != nil {
		return nil, fmt.Errorf("error listing sinks: %w", err)
	}
	return out, nil
}

// UpdateSink writes every mutable field of s (name, connection, enabled,
// options, budget, writer) and sets updated_at. Owner and kind never
// change. A duplicate name is ErrSinkNameTaken; a missing row pgx.ErrNoRows.
func UpdateSink(ctx context.Context, db DBTX, s Sink) (Sink, error) {
	out, err := scanSink(db.QueryRow(ctx, `UPDATE switchboard.sinks SET name = $2, connection_id = $3, enabled = $4, options = $5,
			budget_per_hour = $6, budget_burst = $7, updated_by_human_id = NULLIF($8::text, ''), updated_by_endpoint_id = NULLIF($9::bigint, 0),
			updated_at = now()
		WHERE id = $1 RETURNING `+sinkColumns,
		s.ID, s.Name, s.ConnectionID, s.Enabled, s.Options, s.BudgetPerHour, s.BudgetBurst,
		s.UpdatedByHumanID, s.UpdatedByEndpointID))
	if isUniqueViolation(err, "sinks_owner_name_key") {
		return Sink{}, ErrSinkNameTaken
	}
	if err != nil {
		return Sink{}, fmt.Errorf("error updating sink: %w", err)
	}
	return out, nil
}

// DeleteSink deletes a sink; its subscriptions and outbox rows go with it
// (foreign key cascade), its delivery records stay (REQ-5). A missing row is
// pgx.ErrNoRows.
func DeleteSink(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `DELETE FROM switchboard.sinks WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("error deleting sink: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("error deleting sink: %w", pgx.ErrNoRows)
	}
	return nil
}

// SinkIDsOf returns the ids of every sink of the given owner scopes, in
// ascending order. It reads the (owner, name) index: the cost is that of
// the scopes' sinks, not of every sink.
func SinkIDsOf(ctx context.Context, db DBTX, scopes []string) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT id FROM switchboard.sinks WHERE owner = ANY($1::text[]) ORDER BY id`, scopes)
	if err != nil {
		return nil, fmt.Errorf("error listing sinks of scopes: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("error listing sinks of scopes: %w", err)
	}
	return ids, nil
}

// SinkOwners returns the owner scope of each of ids that names a sink; an
// id of no sink is left out.
func SinkOwners(ctx context.Context, db DBTX, ids []int64) (map[int64]notifytype.OwnerScope, error) {
	rows, err := db.Query(ctx, `SELECT id, owner FROM switchboard.sinks WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading sink owners: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]notifytype.OwnerScope, len(ids))
	for rows.Next() {
		var id int64
		var owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, fmt.Errorf("error reading sink owners: %w", err)
		}
		scope, err := notifytype.ParseOwnerScope(owner)
		if err != nil {
			return nil, fmt.Errorf("error reading sink %d owner: %w", id, err)
		}
		out[id] = scope
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading sink owners: %w", err)
	}
	return out, nil
}
