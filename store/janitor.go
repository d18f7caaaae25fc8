package store

import (
	"context"
	"fmt"
	"time"
)

// Pruned counts what PruneSpent removed.
type Pruned struct {
	AgentPages int64
}

// PruneSpent removes the engine's agent pages paged before pagesBefore
// (past the window they are counted in).
func PruneSpent(ctx context.Context, db DBTX, pagesBefore time.Time) (Pruned, error) {
	tag, err := db.Exec(ctx, `DELETE FROM switchboard.agent_pages WHERE paged_at < $1`, pagesBefore)
	if err != nil {
		return Pruned{}, fmt.Errorf("error deleting agent pages: %w", err)
	}
	return Pruned{AgentPages: tag.RowsAffected()}, nil
}

// Expired counts what PruneExpired removed, per table.
type Expired struct {
	// DeliveryRecords and OutboxRows: delivery records sent, and outbox
	// rows finished, before the cut-off (REQ-10).
	DeliveryRecords int64
	OutboxRows      int64
	// Writes: write_log rows recorded before the cut-off.
	Writes int64
	// DigestRuns: digest runs before the cut-off.
	DigestRuns int64
}

// Total is the number of rows removed.
func (x Expired) Total() int64 {
	return x.DeliveryRecords + x.OutboxRows + x.Writes + x.DigestRuns
}

// expiry is one table the janitor prunes: a DELETE of at most $2 rows
// older than $1, found through an index on their age.
type expiry struct {
	what string
	n    func(*Expired) *int64
	sql  string
}

var expiries = []expiry{
	{"delivery records", func(x *Expired) *int64 { return &x.DeliveryRecords },
		// delivery_records_age
		`DELETE FROM switchboard.delivery_records WHERE id IN (SELECT id FROM switchboard.delivery_records WHERE sent_at < $1 LIMIT $2)`},
	{"finished outbox rows", func(x *Expired) *int64 { return &x.OutboxRows },
		// outbox_finished (finished_at < $1 implies finished_at IS NOT NULL)
		`DELETE FROM switchboard.outbox WHERE id IN (SELECT id FROM switchboard.outbox WHERE finished_at < $1 LIMIT $2)`},
	{"write log rows", func(x *Expired) *int64 { return &x.Writes },
		// write_log_age
		`DELETE FROM switchboard.write_log WHERE id IN (SELECT id FROM switchboard.write_log WHERE at < $1 LIMIT $2)`},
	{"digest runs", func(x *Expired) *int64 { return &x.DigestRuns },
		// digest_runs_age
		`DELETE FROM switchboard.digest_runs WHERE id IN (SELECT id FROM switchboard.digest_runs WHERE ran_at < $1 LIMIT $2)`},
}

// PruneExpired removes what of the engine's is older than before, table by
// table, in deletes of at most batch rows each: delivery records and
// finished outbox rows (REQ-10), the write log and digest runs. Give it a pool or a connection outside a transaction, so
// each batch commits on its own and no delete holds many locks or a long
// transaction; it stops at the first error, with the counts so far, and
// between batches when ctx is done.
func PruneExpired(ctx context.Context, db DBTX, before time.Time, batch int) (Expired, error) {
	return prune(ctx, db, expiries, before, batch)
}

func prune(ctx context.Context, db DBTX, expiries []expiry, before time.Time, batch int) (Expired, error) {
	if batch <= 0 {
		panic("store: pruning needs a positive batch")
	}
	var x Expired
	for _, e := range expiries {
		n := e.n(&x)
		for {
			if err := ctx.Err(); err != nil {
				return x, fmt.Errorf("error deleting %s: %w", e.what, err)
			}
			tag, err := db.Exec(ctx, e.sql, before, batch)
			if err != nil {
				return x, fmt.Errorf("error deleting %s: %w", e.what, err)
			}
			*n += tag.RowsAffected()
			if tag.RowsAffected() < int64(batch) {
				break
			}
		}
	}
	return x, nil
}
