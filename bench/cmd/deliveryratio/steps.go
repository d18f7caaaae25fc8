package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/store"
)

// stepNames are the steps of one delivery, in order, as steps times them.
var stepNames = []string{"emit tx", "fan-out", "claim", "reserve tx", "send", "finish tx"}

// steps replays what the engine does for one event and one sink, a step at
// a time on the host's pool, with no engine serving, and returns each
// step's median in ms over count events: the emit transaction (BEGIN, Emit
// with NOTIFY, COMMIT), the claimer's fan-out statement and claim
// statement (each its own autocommit), the actor's reservation transaction
// (lock the sink, read its budget, start the attempt, insert the delivery
// record, COMMIT), the POST, and the transaction that records the outcome.
// The statements are the engine's own (package store); the engine between
// them adds only channel hand-offs, rendering and the vault's decryption.
func (w *world) steps(ctx context.Context, count int) ([]float64, error) {
	eng, err := engine.New(w.config(w.host, -1, nil))
	if err != nil {
		return nil, err
	}
	o := w.owner[1]
	c := plainClient(1)
	defer c.CloseIdleConnections()
	body := baselineBody()
	const instance = "bench-steps"
	took := make([][]float64, len(stepNames))
	for i := range count + 5 {
		var d [6]time.Duration
		t := time.Now()
		if _, err := w.emit(ctx, eng, o); err != nil {
			return nil, err
		}
		d[0] = time.Since(t)

		t = time.Now()
		if _, _, err := store.FanOut(ctx, w.host, 500); err != nil {
			return nil, err
		}
		d[1] = time.Since(t)

		t = time.Now()
		rows, err := store.ClaimDue(ctx, w.host, store.ClaimParams{
			Instance: instance, Now: time.Now(), TTL: engine.ClaimTTLDefault, Limit: 64, PerSink: 8,
		})
		if err != nil {
			return nil, err
		}
		d[2] = time.Since(t)
		if len(rows) != 1 {
			return nil, fmt.Errorf("claimed %d rows, want 1", len(rows))
		}

		t = time.Now()
		var recID int64
		err = pgx.BeginFunc(ctx, w.host, func(tx pgx.Tx) error {
			now := time.Now()
			s, err := store.LockSinkForDelivery(ctx, tx, rows[0].SinkID)
			if err != nil {
				return err
			}
			if _, err := store.BudgetTAT(ctx, tx, s.ID); err != nil {
				return err
			}
			r, err := store.StartAttempt(ctx, tx, rows[0].ID, instance, now, engine.ClaimTTLDefault)
			if err != nil {
				return err
			}
			tat := now.Add(time.Hour / budgetPerHour)
			recID, err = store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
				SinkID: s.ID, Owner: s.Owner, OutboxID: r.ID, EventType: r.EventType, Attempt: r.Attempts,
				CountsBudget: true, SentAt: now, BudgetTAT: &tat,
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		d[3] = time.Since(t)

		t = time.Now()
		if err := post(ctx, c, w.gs.URL, body); err != nil {
			return nil, err
		}
		d[4] = time.Since(t)

		t = time.Now()
		err = pgx.BeginFunc(ctx, w.host, func(tx pgx.Tx) error {
			now := time.Now()
			if err := store.FinishDeliveryRecord(ctx, tx, recID, "delivered", "", 200, now); err != nil {
				return err
			}
			return store.FinishRows(ctx, tx, []int64{rows[0].ID}, instance, store.RowOutcome{State: "delivered"}, now)
		})
		if err != nil {
			return nil, err
		}
		d[5] = time.Since(t)

		if i >= 5 { // the first few prepare the statements
			for k := range d {
				took[k] = append(took[k], ms(d[k]))
			}
		}
	}
	out := make([]float64, len(took))
	for k := range took {
		out[k] = benchdb.Median(took[k])
	}
	return out, nil
}
