package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/store"
)

// stepNames are the steps of one delivery, in order, as steps times them.
var stepNames = []string{"emit tx", "fan-out", "claim", "reserve tx", "send", "finish tx",
	"  BEGIN + lock sink", "  budget TAT", "  start attempt", "  insert record", "  COMMIT"}

// steps replays what the engine does for one event and one sink, a step at
// a time on the host's pool, with no engine serving, and returns each
// step's median in ms over count events: the emit transaction (BEGIN, Emit
// with NOTIFY, COMMIT), the claimer's fan-out statement and claim
// statement (each its own autocommit), the actor's reservation transaction
// (lock the sink, read its budget, start the attempt, insert the delivery
// record, COMMIT), the POST, and the transaction that records the outcome.
// The statements are the engine's own (package store); the engine between
// them adds only channel hand-offs, rendering and the vault's decryption.
// The reservation's statements are timed one by one too.
func (w *world) steps(ctx context.Context, count int) ([]float64, error) {
	if _, err := w.host.Exec(ctx, `VACUUM (ANALYZE) switchboard.outbox, switchboard.outbox_events, switchboard.delivery_records`); err != nil {
		return nil, err
	}
	eng, err := engine.New(w.config(w.host, -1, nil))
	if err != nil {
		return nil, err
	}
	o := w.owner[1]
	c := plainClient(1)
	defer c.CloseIdleConnections()
	body := baselineBody()
	const instance = "bench-steps"
	// The steps start attempts as this instance: it beats, as an engine
	// does, so that the dispatch fence lets it.
	if err := store.Beat(ctx, w.host, instance, time.Now(), time.Hour, time.Minute); err != nil {
		return nil, err
	}
	took := make([][]float64, len(stepNames))
	for i := range count + 5 {
		var d [11]time.Duration
		t := time.Now()
		if _, err := w.emit(ctx, eng, o); err != nil {
			return nil, err
		}
		d[0] = time.Since(t)

		t = time.Now()
		if _, err := store.FanOut(ctx, w.host, 500, time.Now(), store.Replacements{}); err != nil {
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
		recID, sub, err := reserve(ctx, w.host, rows[0], instance)
		if err != nil {
			return nil, err
		}
		d[3] = time.Since(t)
		copy(d[6:], sub[:])

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
			return store.FinishRows(ctx, tx, []store.Claimed{rows[0].Claim()}, instance, store.RowOutcome{State: "delivered"}, now, store.Replacements{})
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

// reserve is the actor's reservation transaction (engine/delivery.go,
// worker.Deliver) on a claimed row, each statement timed.
func reserve(ctx context.Context, pool *pgxpool.Pool, row store.OutboxRow, instance string) (int64, [5]time.Duration, error) {
	var d [5]time.Duration
	t := time.Now()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, d, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	now := time.Now()
	s, err := store.LockSinkForDelivery(ctx, tx, row.SinkID)
	if err != nil {
		return 0, d, err
	}
	d[0] = time.Since(t)
	t = time.Now()
	if _, err := store.BudgetTAT(ctx, tx, s.ID); err != nil {
		return 0, d, err
	}
	d[1] = time.Since(t)
	t = time.Now()
	r, _, err := store.StartAttempt(ctx, tx, row.Claim(), instance, now, engine.ClaimTTLDefault, engine.MaxAttempts)
	if err != nil {
		return 0, d, err
	}
	d[2] = time.Since(t)
	t = time.Now()
	tat := now.Add(time.Hour / budgetPerHour)
	recID, err := store.InsertDeliveryRecord(ctx, tx, store.DeliveryRecord{
		SinkID: s.ID, Owner: s.Owner, OutboxID: r.ID, EventType: r.EventType, Attempt: r.Attempts,
		CountsBudget: true, SentAt: now, BudgetTAT: &tat,
	})
	if err != nil {
		return 0, d, err
	}
	d[3] = time.Since(t)
	t = time.Now()
	err = tx.Commit(ctx)
	d[4] = time.Since(t)
	return recID, d, err
}
