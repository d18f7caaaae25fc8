package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Write is one write_log row: who wrote what, in which owner scope
// (REQ-5). HumanID is the acting human (an endpoint's accountable human
// when an endpoint acted); EndpointID is 0 when a human acted.
type Write struct {
	ID         int64
	At         time.Time
	Owner      string
	Action     string
	ObjectKind string
	ObjectID   int64
	HumanID    string
	EndpointID int64
}

// InsertWrite records a write; call it in the write's own transaction.
func InsertWrite(ctx context.Context, db DBTX, w Write) error {
	_, err := db.Exec(ctx, `
		INSERT INTO switchboard.write_log (owner, action, object_kind, object_id, acting_human_id, acting_endpoint_id)
		VALUES ($1, $2, $3, $4, nullif($5::text, ''), nullif($6::bigint, 0))`,
		w.Owner, w.Action, w.ObjectKind, w.ObjectID, w.HumanID, w.EndpointID)
	if err != nil {
		return fmt.Errorf("error recording write: %w", err)
	}
	return nil
}

// ListWrites lists an object's recorded writes, oldest first.
func ListWrites(ctx context.Context, db DBTX, objectKind string, objectID int64) ([]Write, error) {
	rows, err := db.Query(ctx, `
		SELECT id, at, owner, action, object_kind, object_id, coalesce(acting_human_id, ''), coalesce(acting_endpoint_id, 0)
		FROM switchboard.write_log WHERE object_kind = $1 AND object_id = $2 ORDER BY id`, objectKind, objectID)
	if err != nil {
		return nil, fmt.Errorf("error listing writes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Write, error) {
		var w Write
		err := r.Scan(&w.ID, &w.At, &w.Owner, &w.Action, &w.ObjectKind, &w.ObjectID, &w.HumanID, &w.EndpointID)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing writes: %w", err)
	}
	return out, nil
}
