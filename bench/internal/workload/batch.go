package workload

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/sinks"
)

// BatchEmitter is the engine API the batch variants measure, when the
// engine offers it: Emit queued into the host's own pgx.Batch, so that the
// event's row rides the round trip that carries the host's statements,
// inside the host's transaction, with Emit's guarantees (the row commits
// or rolls back with the host's writes; the NOTIFY, when due, is sent at
// commit). QueueEmit validates ev at once (returning Emit's
// invalid_argument errors) and queues the statement(s); an error of the
// queued statements comes back from the batch's results (SendBatch …
// Close), where a host checks its own. The plain Emit is unchanged.
//
// The engine does not implement it yet (issue 10, §8): the batch emit
// variants then report "not offered" and only bare_batch runs. An engine
// that implements it is measured with no change here.
type BatchEmitter interface {
	QueueEmit(b *pgx.Batch, ev engine.Event) error
}

// BatchEmitter returns the engine as a BatchEmitter, if it is one.
func (w *World) BatchEmitter() (BatchEmitter, bool) {
	be, ok := any(w.Engine).(BatchEmitter)
	return be, ok
}

// HostVariants lists the variants this engine can run: every plain one,
// bare_batch, and the batch emits when the engine is a BatchEmitter.
func (w *World) HostVariants() []Variant {
	vs := append(append([]Variant{}, Variants...), BareBatch)
	if _, ok := w.BatchEmitter(); ok {
		vs = append(vs, Emit1SinkBatch, Emit10SinksBatch)
	}
	return vs
}

// hostTxBatch is the host transaction with its statements in one batch:
// BEGIN; batch{UPDATE the todo; INSERT its attempt; [QueueEmit]}; COMMIT.
// n is the todo's new dead-letter count, which the host knows (it read
// the todo to decide to dead-letter it; here the round robin tells it).
func (w *World) hostTxBatch(ctx context.Context, v Variant, h *hostSet, todo int64, n int) error {
	return pgx.BeginFunc(ctx, w.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`UPDATE todos SET state = 'dead', dead_letter_count = dead_letter_count + 1, updated_at = now()
			WHERE id = $1`, todo)
		b.Queue(`INSERT INTO attempts (todo_id, number, kind, outcome, finished_at)
			VALUES ($1, $2, 'agent', 'failed', now())`, todo, n)
		if v != BareBatch {
			be, ok := w.BatchEmitter()
			if !ok {
				return fmt.Errorf("%s: the engine offers no QueueEmit", v)
			}
			if err := be.QueueEmit(b, engine.Event{
				Type: host.EventTodoDeadLettered, Owner: h.owner, QueueID: h.queue,
				OccurrenceKey: host.DeadLetterKey(todo, n),
				Content:       host.WithTodo(sinks.Content{Title: "flaky build", Place: "forge"}, host.TodoContent{Cause: "fail at the cap"}),
			}); err != nil {
				return err
			}
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		return nil
	})
}
