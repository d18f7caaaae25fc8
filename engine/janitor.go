package engine

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/store"
)

// janitorLockKey is the advisory lock that lets one instance at a time
// clean up ("sbjanitr" in ASCII).
const janitorLockKey int64 = 0x73626a616e697472

// janitor removes delivery records and finished outbox rows past
// retention (REQ-10), and what is of no more use (agent pages past their
// hour, expired sessions, used or expired login links), at start and every
// JanitorInterval of the engine's clock. One instance at a time does it, under a transaction-level advisory
// lock: no leader of our own.
type janitor struct{ e *Engine }

func (j *janitor) String() string { return "janitor" }

func (j *janitor) Serve(ctx context.Context) error {
	for {
		if err := j.e.CleanUp(ctx); err != nil && ctx.Err() == nil {
			j.e.log.Error("error cleaning up", "error", err)
		}
		t := j.e.cfg.Clock.NewTimer(j.e.cfg.JanitorInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.Chan():
		}
	}
}

// CleanUp removes what is older than the retention period, unless another
// instance is doing it right now.
func (e *Engine) CleanUp(ctx context.Context) error {
	return pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		var mine bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, janitorLockKey).Scan(&mine); err != nil || !mine {
			return err
		}
		now, err := e.now(ctx)
		if err != nil {
			return err
		}
		before := now.Add(-e.cfg.Retention)
		records, rows, err := store.DeleteExpired(ctx, tx, before)
		if err != nil {
			return err
		}
		if records+rows > 0 {
			e.log.Info("removed expired delivery history", "delivery_records", records, "outbox_rows", rows,
				"older_than", before.Format(time.RFC3339))
		}
		p, err := store.PruneSpent(ctx, tx, now, now.Add(-agentPageWindow))
		if err != nil {
			return err
		}
		if p.AgentPages+p.Sessions+p.LoginLinks > 0 {
			e.log.Info("removed spent pages, sessions and login links", "agent_pages", p.AgentPages,
				"sessions", p.Sessions, "login_links", p.LoginLinks)
		}
		return nil
	})
}
