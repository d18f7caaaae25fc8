package hoststore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ownedTables maps a kind of reference-host object to its table; every one
// has an owner column.
var ownedTables = map[string]string{
	"queue":    "queues",
	"endpoint": "endpoints",
	"webhook":  "webhooks",
	"todo":     "todos",
}

// OwnedIDs returns, in ascending order and without repeats, which of ids
// are objects of kind ("queue", "endpoint", "webhook" or "todo") owned by
// scope.
func OwnedIDs(ctx context.Context, db DBTX, scope, kind string, ids []int64) ([]int64, error) {
	table, ok := ownedTables[kind]
	if !ok {
		return nil, fmt.Errorf("error reading owned ids: unknown kind %q", kind)
	}
	if len(ids) == 0 {
		return []int64{}, nil
	}
	rows, err := db.Query(ctx, `SELECT id FROM `+table+` WHERE owner = $1 AND id = ANY($2) ORDER BY id`, scope, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading owned %ss: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("error reading owned %ss: %w", kind, err)
	}
	return out, nil
}
