package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// EmitToSink records ev, in the caller's transaction tx, for the one sink
// sinkID: the notify of a routing rule names its sink (REQ-8, D17), so the
// event goes to that sink and no other, whatever the subscriptions say. It
// writes one outbox row when the sink exists in ev.Owner's scope and is
// enabled, and reports whether it did; otherwise it writes nothing (the
// host records a trace fault). A repeat of ev's dedup key while the row is
// open adds to its count ("and N more"), as Emit's rows do (D7).
func (e *Engine) EmitToSink(ctx context.Context, tx pgx.Tx, sinkID int64, ev Event) (bool, error) {
	if sinkID <= 0 {
		return false, notifytype.InvalidArgument("sink_id", "an addressed event needs its sink")
	}
	now, err := e.nowIn(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("error emitting %s to sink %d: %w", ev.Type, sinkID, err)
	}
	p, err := e.emitParams(ev, now)
	if err != nil {
		return false, err
	}
	p.Notify = p.DueAfter <= 0 && e.mayNotify()
	ok, err := store.EnqueueForSinkTx(ctx, tx, sinkID, p)
	if err != nil {
		return false, fmt.Errorf("error emitting %s to sink %d: %w", ev.Type, sinkID, err)
	}
	return ok, nil
}
