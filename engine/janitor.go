package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard/notify/store"
)

// janitorLockKey is the second key of the advisory lock that lets one
// instance at a time clean up (store.LockFamilyJanitor is the first).
const janitorLockKey int32 = 0

// janitorUnlockTimeout bounds giving the janitor's lock back.
const janitorUnlockTimeout = 5 * time.Second

// janitor removes, past retention, delivery records and finished outbox
// rows (REQ-10) and the history that would otherwise grow without bound
// (the write log, digest runs), and what is of no more use (agent pages
// past their hour), then runs the host's own clean-up
// (Config.HostCleanUp), at start and every JanitorInterval of the engine's
// clock. One instance at a time does
// it, under a session-level advisory lock: no leader of our own.
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

// CleanUp removes what is older than the retention period (Config.Retention,
// 30 days by default, on the database's clock), unless another instance is
// doing it right now. Old rows go in deletes of at most Config.JanitorBatch
// rows, each committed on its own, so a backlog neither makes one long
// transaction nor holds many row locks at once. Config.HostCleanUp, when
// set, runs last, under the same lock.
func (e *Engine) CleanUp(ctx context.Context) error {
	conn, err := e.cfg.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error acquiring a connection to clean up: %w", err)
	}
	defer conn.Release()
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, store.LockFamilyJanitor, janitorLockKey).Scan(&mine); err != nil {
		return fmt.Errorf("error taking the janitor lock: %w", err)
	}
	if !mine {
		return nil
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), janitorUnlockTimeout)
		defer cancel()
		if _, uerr := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1, $2)`, store.LockFamilyJanitor, janitorLockKey); uerr != nil {
			// The session may still hold the lock: closing it releases the
			// lock, and the pool drops the closed connection.
			_ = conn.Conn().Close(unlockCtx)
		}
	}()

	now, err := e.nowIn(ctx, conn) // conn is held: read through it, not another connection
	if err != nil {
		return err
	}
	before := now.Add(-e.cfg.Retention)
	x, err := store.PruneExpired(ctx, conn, before, e.cfg.JanitorBatch)
	if x.DeliveryRecords+x.OutboxRows > 0 {
		e.log.Info("removed expired delivery history", "delivery_records", x.DeliveryRecords, "outbox_rows", x.OutboxRows,
			"older_than", before.Format(time.RFC3339))
	}
	if x.Writes+x.DigestRuns > 0 {
		e.log.Info("removed expired history", "write_log", x.Writes, "digest_runs", x.DigestRuns,
			"older_than", before.Format(time.RFC3339))
	}
	if err != nil {
		return err
	}
	p, err := store.PruneSpent(ctx, conn, now.Add(-agentPageWindow))
	if err != nil {
		return err
	}
	if p.AgentPages > 0 {
		e.log.Info("removed spent agent pages", "agent_pages", p.AgentPages)
	}
	if e.cfg.HostCleanUp != nil {
		if err := e.cfg.HostCleanUp(ctx, conn.Conn(), now, before, e.cfg.JanitorBatch); err != nil {
			return fmt.Errorf("error cleaning up the host's tables: %w", err)
		}
	}
	return nil
}
