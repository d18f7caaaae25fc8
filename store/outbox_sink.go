package store

import (
	"context"
	"fmt"
)

// enqueueForSinkSQL writes an event addressed to one sink (a routing
// rule's notify, D17) straight into the outbox, in the caller's
// transaction: one row, when the sink exists in the event's scope and is
// enabled. A repeat of a windowed key while its row is open adds to the
// row's count (D7). It reports whether a row was written or counted on.
const enqueueForSinkSQL = `
WITH ins AS (
INSERT INTO switchboard.outbox (sink_id, owner, event_type, severity, dedup_key, windowed, count, payload, include_excerpt, due_at)
SELECT k.id, $2::text, $3::text, $4::text, $5::text, $6::boolean, 1, $7::jsonb, false, $8::timestamptz
FROM switchboard.sinks k WHERE k.id = $1 AND k.owner = $2::text AND k.enabled
ON CONFLICT (sink_id, dedup_key) WHERE state IN ('pending', 'held') AND dedup_key IS NOT NULL DO UPDATE SET
    count = outbox.count + CASE WHEN outbox.windowed THEN 1 ELSE 0 END
RETURNING 1
)
SELECT count(*) FROM ins`

// EnqueueForSinkTx writes p as one outbox row for sinkID (see
// enqueueForSinkSQL) and reports whether it did.
func EnqueueForSinkTx(ctx context.Context, db DBTX, sinkID int64, p EmitParams) (bool, error) {
	var n int
	if err := db.QueryRow(ctx, enqueueForSinkSQL, sinkID, p.Owner, p.EventType, p.Severity, p.DedupKey,
		p.Windowed, p.Payload, p.DueAt.Add(p.DueAfter)).Scan(&n); err != nil {
		return false, fmt.Errorf("error writing outbox row for sink %d: %w", sinkID, err)
	}
	if n > 0 && p.Notify {
		if _, err := db.Exec(ctx, `SELECT pg_notify('switchboard_outbox', '')`); err != nil {
			return false, fmt.Errorf("error waking claimers: %w", err)
		}
	}
	return n > 0, nil
}
