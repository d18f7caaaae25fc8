package notifytest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginehooks"
)

// Delivered is what a Deliver did: the rows it saw due or claimed, by id,
// with the state each was left in ("delivered", "pending" for a retry,
// "held" past the sink's budget, "partial", "undeliverable").
type Delivered map[int64]string

// pollEvery is how often Deliver looks whether the attempts it started are
// recorded: a condition read from the database, never a fixed wait.
const pollEvery = 5 * time.Millisecond

// Deliver delivers what is due now through eng and returns once it is
// recorded: it fans out the events committed so far and claims the rows
// due on the database's clock (as the engine's own claimer does, which may
// take some of them first), and waits until no event waits for fan-out and
// no row is claimed or due, or until ctx ends. eng must be started (its
// sink actors send); db reads the outbox (your pool). It returns the state
// each row it saw due or claimed was left in (the engine's own claimer may
// have finished a row before the call: read the outbox, or the stand-in,
// for what was sent). A row whose attempt failed
// waits for its retry, which a later Deliver makes once it is due.
func Deliver(ctx context.Context, eng *engine.Engine, db DBTX) (Delivered, error) {
	seen := map[int64]bool{}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		claimed, _, _, err := enginehooks.ClaimOnce(ctx, eng)
		if err != nil {
			return nil, fmt.Errorf("error claiming: %w", err)
		}
		for _, id := range claimed {
			seen[id] = true
		}
		ids := slices.Collect(maps.Keys(seen))
		rows, err := db.Query(ctx, `
			SELECT id, state, state = 'claimed' OR (state = 'pending' AND due_at <= now())
			FROM switchboard.outbox
			WHERE id = ANY($1) OR state = 'claimed' OR (state = 'pending' AND due_at <= now())
			UNION ALL
			(SELECT 0, 'event', true FROM switchboard.outbox_events LIMIT 1)`, ids)
		if err != nil {
			return nil, fmt.Errorf("error reading the outbox: %w", err)
		}
		type row struct {
			ID    int64
			State string
			Busy  bool
		}
		states, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			return nil, fmt.Errorf("error reading the outbox: %w", err)
		}
		busy := false
		out := Delivered{}
		for _, r := range states {
			busy = busy || r.Busy
			if r.ID != 0 {
				seen[r.ID] = true
				out[r.ID] = r.State
			}
		}
		if !busy {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the due rows to be recorded: %w", ctx.Err())
		case <-t.C:
		}
	}
}
