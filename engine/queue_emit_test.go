package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store/storetest"
)

// queueEmitTx runs the host's transaction as a batching host does: its own
// statement and the queued emits in one batch, then commit (or rollback).
func (b *emitBundle) queueEmitTx(t *testing.T, commit bool, evs ...engine.Event) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	batch := &pgx.Batch{}
	batch.Queue(`SELECT 1`)
	for _, ev := range evs {
		require.NoError(t, b.eng.QueueEmit(batch, ev))
	}
	require.Equal(t, 1+len(evs), batch.Len(), "QueueEmit queues exactly one statement")
	require.NoError(t, tx.SendBatch(ctx, batch).Close())
	if commit {
		require.NoError(t, tx.Commit(ctx))
	}
}

// eventRows is outbox_events as a comparable text, ids left out.
func eventRows(t *testing.T, b *emitBundle) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT concat_ws('|', owner, event_type, match_types::text, severity, severity_rank, queue_id, endpoint_id,
		                 webhook_id, coalesce(dedup_key, '-'), windowed, payload::text, coalesce(body, '-'),
		                 due_at, sink_ids::text, excerpt_sink_ids::text)
		FROM switchboard.outbox_events ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func TestQueueEmitRolledBackLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: host.EventTypes})

	b.queueEmitTx(t, false, deadLetter(alice, 0, 9, 1))
	require.Empty(t, eventRows(t, b))
	require.Empty(t, b.rows(t))
}

func TestQueueEmitCommitWritesWhatEmitWrites(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := hostid.Human(b.f.Human(""))
	q := b.f.Queue(alice, "")
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}})
	optedIn := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: optedIn, EventTypes: []notifytype.EventType{host.EventTodoDeadLettered}, IncludeExcerpt: true})

	b.emit(t, deadLetter(alice, q, 7, 1))
	want := eventRows(t, b)
	require.Len(t, want, 1)
	_, err := b.pool.Exec(context.Background(), `TRUNCATE switchboard.outbox_events`)
	require.NoError(t, err)

	b.queueEmitTx(t, true, deadLetter(alice, q, 7, 1))
	require.Equal(t, want, eventRows(t, b), "the same row, with the same sinks and excerpt sinks")

	rows := b.rows(t)
	require.Len(t, rows, 2)
	require.ElementsMatch(t, []int64{sink, optedIn}, []int64{rows[0].SinkID, rows[1].SinkID})
	for _, r := range rows {
		require.Equal(t, "todo:7:1", *r.DedupKey)
		require.True(t, r.DueAt.Equal(b.now), "due at once, at the engine's clock")
		require.Equal(t, r.SinkID == optedIn, r.Payload.Body == "the issue body", "the excerpt only where opted in")
	}
}

func TestQueueEmitRefusesABadEventBeforeTheBatchIsSent(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	alice := notifytype.Human("1")
	for name, tc := range map[string]struct {
		ev    engine.Event
		field string
	}{
		"unknown type":         {engine.Event{Type: "todo.exploded", Owner: alice}, "type"},
		"no owner":             {engine.Event{Type: engine.EventDigest}, "owner"},
		"bad severity":         {engine.Event{Type: engine.EventDigest, Owner: alice, Severity: "urgent"}, "severity"},
		"dead letter, no todo": {engine.Event{Type: host.EventTodoDeadLettered, Owner: alice}, "occurrence_key"},
		"quarantine, no hook":  {engine.Event{Type: host.EventDeliveryQuarantined, Owner: alice}, "subject"},
		"rule, no rule":        {engine.Event{Type: host.EventRuleNotify, Owner: alice}, "subject"},
	} {
		t.Run(name, func(t *testing.T) {
			batch := &pgx.Batch{}
			batch.Queue(`SELECT 1`)
			err := b.eng.QueueEmit(batch, tc.ev)
			require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
			e, _ := notifytype.AsError(err)
			require.Equal(t, tc.field, e.Field)
			require.Equal(t, 1, batch.Len(), "nothing queued")
		})
	}
	err := b.eng.QueueEmit(nil, deadLetter(alice, 0, 1, 1))
	require.ErrorIs(t, err, notifytype.ErrInvalidArgument)
}

// TestQueueEmitUsesTheDatabasesClock: with no test clock, the event's
// instant is the database's, read by the statement itself.
func TestQueueEmitUsesTheDatabasesClock(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	eng, err := engine.New(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}})
	require.NoError(t, err)
	b := &emitBundle{pool: pool, f: f, eng: eng}
	alice := hostid.Human(f.Human(""))
	hook := f.Webhook(alice, "")
	sink := f.Sink(storetest.SinkOpts{Owner: alice})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: host.EventTypes})

	ctx := context.Background()
	var before, after time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	b.queueEmitTx(t, true, deadLetter(alice, 0, 3, 1),
		engine.Event{Type: host.EventDeliveryQuarantined, Owner: alice, WebhookID: hook, Subject: host.QuarantineSubject(hook), Content: sinks.Content{Place: "github"}})
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after))

	rows, err := pool.Query(ctx, `SELECT event_type, due_at FROM switchboard.outbox_events ORDER BY id`)
	require.NoError(t, err)
	due := map[string]time.Time{}
	for rows.Next() {
		var typ string
		var at time.Time
		require.NoError(t, rows.Scan(&typ, &at))
		due[typ] = at
	}
	require.NoError(t, rows.Err())
	require.Len(t, due, 2)
	dl := due[string(host.EventTodoDeadLettered)]
	require.False(t, dl.Before(before) || dl.After(after), "due at the database's now: %v not in [%v, %v]", dl, before, after)
	qt := due[string(host.EventDeliveryQuarantined)].Add(-engine.QuarantineWindowDefault)
	require.False(t, qt.Before(before) || qt.After(after), "a quarantine waits out its window from the database's now")
}

// TestQueueEmitWakesTheClaimersAtCommit: the committed batch NOTIFYs the
// channel the claimers listen on.
func TestQueueEmitWakesTheClaimersAtCommit(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	clock := clockwork.NewFakeClockAt(time.Now().UTC())
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}, Clock: clock, NotifyDebounce: -1}, clock))
	require.NoError(t, err)
	b := &emitBundle{pool: pool, f: f, eng: eng}
	alice := hostid.Human(f.Human(""))
	sink := f.Sink(storetest.SinkOpts{Owner: alice})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: host.EventTypes})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, `LISTEN switchboard_outbox`)
	require.NoError(t, err)

	b.queueEmitTx(t, true, deadLetter(alice, 0, 4, 1))
	n, err := listener.Conn().WaitForNotification(ctx)
	require.NoError(t, err, "the claimers are woken")
	require.Equal(t, "switchboard_outbox", n.Channel)
}

// TestQueueEmitDatabaseErrorComesBackFromTheBatch: an emit that fails in
// the database (here: outbox_events locked by another transaction past
// the host's lock_timeout) fails the batch, where the host checks its own
// statements, and the transaction leaves nothing.
func TestQueueEmitDatabaseErrorComesBackFromTheBatch(t *testing.T) {
	t.Parallel()
	b := setupEmit(t)
	// Every emit notifies, so both emits run the one same statement.
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: b.pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}, NotifyDebounce: -1}, clockwork.NewFakeClockAt(b.now)))
	require.NoError(t, err)
	b.eng = eng
	alice := hostid.Human(b.f.Human(""))
	sink := b.f.Sink(storetest.SinkOpts{Owner: alice})
	b.f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: host.EventTypes})
	ctx := context.Background()

	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	send := func(tx pgx.Tx, ev engine.Event) error {
		batch := &pgx.Batch{}
		batch.Queue(`SELECT 1`)
		require.NoError(t, b.eng.QueueEmit(batch, ev))
		return tx.SendBatch(ctx, batch).Close()
	}
	// A first emit on this connection, committed: its statement is
	// prepared, so the next one fails when it runs, not when prepared.
	require.NoError(t, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return send(tx, deadLetter(alice, 0, 1, 1)) }))

	locker, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = locker.Exec(ctx, `LOCK TABLE switchboard.outbox_events IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '100ms'`); err != nil {
			return err
		}
		return send(tx, deadLetter(alice, 0, 2, 1))
	})
	require.NoError(t, locker.Rollback(ctx))
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available")
	require.Contains(t, err.Error(), "error writing outbox event")
	require.Len(t, eventRows(t, b), 1, "only the first, committed emit")
}

// TestQueueEmitDeliversEndToEnd: a batched emit of one scope reaches that
// scope's subscribed sinks through a serving engine, and no other's.
func TestQueueEmitDeliversEndToEnd(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	g := newGotify(t)
	_, p, scope := w.Human()
	_, otherP, other := w.Human()
	eng := w.Serve()
	mine := []int64{
		w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.one"}),
		w.Sink(eng, p, scope, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.two"}),
	}
	theirs := w.Sink(eng, otherP, other, enginetest.SinkOpts{BaseURL: g.URL, Secret: "gtfya.three"})

	require.NoError(t, pgx.BeginFunc(w.Ctx, w.Pool, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue(`SELECT 1`)
		if err := eng.QueueEmit(batch, deadLetterOf(scope, 1)); err != nil {
			return err
		}
		return tx.SendBatch(w.Ctx, batch).Close()
	}))
	w.FanOut(eng)
	got := []int64{}
	for _, a := range w.WaitN(2) {
		require.Equal(t, "delivered", a.State)
		got = append(got, a.SinkID)
	}
	require.ElementsMatch(t, mine, got)
	require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1`, theirs), "another scope's sink gets nothing")
	require.Len(t, g.received(), 2)
}

// TestQueueEmitEquivalentToEmit draws a world (sinks of three scopes with
// random subscriptions) and random host transactions of random events,
// each committed or rolled back, and runs them once through Emit and once
// through QueueEmit: the events written (their sinks, excerpt sinks, keys,
// due times) and the outbox rows fanned out from them are the same.
func TestQueueEmitEquivalentToEmit(t *testing.T) {
	pool := hosttest.New(t)
	f := hosttest.NewFactory(t, pool)
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	eng, err := engine.New(testhooks.WithDatabaseClock(engine.Config{Pool: pool, Events: host.Events(), Links: host.Links(), Directory: emitDirectory{}, Clock: clock}, clock))
	require.NoError(t, err)
	b := &emitBundle{pool: pool, f: f, eng: eng, now: clock.Now()}
	scopes := []notifytype.OwnerScope{hostid.Human(f.Human("")), hostid.Human(f.Human("")), hostid.Team(f.Team(""))}
	types := []notifytype.EventType{host.EventTodoDeadLettered, host.EventRelayExhausted,
		host.EventDeliveryQuarantined, host.EventRuleNotify, engine.EventAgentNotify}
	obj := func(rt *rapid.T, label string) int64 { return int64(rapid.IntRange(1, 3).Draw(rt, label)) }

	outboxRows := func(rt *rapid.T) []string {
		_, err := testhooks.FanOut(ctx, eng)
		require.NoError(rt, err)
		rows, err := pool.Query(ctx, `
			SELECT concat_ws('|', sink_id, owner, event_type, severity, coalesce(dedup_key, '-'), windowed, count,
			                 payload::text, include_excerpt, due_at, state)
			FROM switchboard.outbox ORDER BY id`)
		require.NoError(rt, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(rt, err)
		return out
	}
	reset := func(rt *rapid.T, all bool) {
		tables := []string{"outbox", "outbox_events", "delivery_records"}
		if all {
			tables = append(tables, "subscriptions", "sinks", "connections")
		}
		for _, table := range tables { // DELETE: TRUNCATE costs far more on tables this small
			_, err := pool.Exec(ctx, `DELETE FROM `+storetest.Table(table))
			require.NoError(rt, err)
		}
	}

	rapid.Check(t, func(rt *rapid.T) {
		reset(rt, true)
		for i := range rapid.IntRange(1, 6).Draw(rt, "sinks") {
			l := fmt.Sprintf("sink%d", i)
			sink := f.Sink(storetest.SinkOpts{Owner: rapid.SampledFrom(scopes).Draw(rt, l+".scope"), Disabled: rapid.Bool().Draw(rt, l+".disabled")})
			for j := range rapid.IntRange(0, 2).Draw(rt, l+".subs") {
				sl := fmt.Sprintf("%s.sub%d", l, j)
				o := storetest.SubscriptionOpts{
					Sink:           sink,
					EventTypes:     rapid.SliceOfNDistinct(rapid.SampledFrom(types), 1, 3, rapid.ID).Draw(rt, sl+".types"),
					MinSeverity:    rapid.SampledFrom(notifytype.Severities).Draw(rt, sl+".min"),
					IncludeExcerpt: rapid.Bool().Draw(rt, sl+".excerpt"),
				}
				if rapid.Bool().Draw(rt, sl+".byQueue") {
					o.Queues = []int64{obj(rt, sl+".queue")}
				}
				if rapid.Bool().Draw(rt, sl+".byWebhook") {
					o.Webhooks = []int64{obj(rt, sl+".webhook")}
				}
				f.Subscription(o)
			}
		}
		type hostTx struct {
			events []engine.Event
			commit bool
		}
		txs := make([]hostTx, rapid.IntRange(1, 5).Draw(rt, "txs"))
		for i := range txs {
			l := fmt.Sprintf("tx%d", i)
			txs[i].commit = rapid.Bool().Draw(rt, l+".commit")
			for j := range rapid.IntRange(1, 3).Draw(rt, l+".events") {
				el := fmt.Sprintf("%s.ev%d", l, j)
				ev := engine.Event{
					Owner:    rapid.SampledFrom(scopes).Draw(rt, el+".scope"),
					Type:     rapid.SampledFrom(types).Draw(rt, el+".type"),
					Severity: rapid.SampledFrom(append([]notifytype.Severity{""}, notifytype.Severities...)).Draw(rt, el+".severity"),
					Content:  sinks.Content{Title: "t", Body: rapid.SampledFrom([]string{"", "the body"}).Draw(rt, el+".body")},
				}
				switch ev.Type {
				case host.EventTodoDeadLettered, host.EventRelayExhausted:
					ev.QueueID = obj(rt, el+".queue")
					ev.OccurrenceKey = host.DeadLetterKey(obj(rt, el+".todo"), rapid.IntRange(1, 2).Draw(rt, el+".dlc"))
				case host.EventDeliveryQuarantined:
					ev.WebhookID = obj(rt, el+".webhook")
					ev.Subject = host.QuarantineSubject(ev.WebhookID)
				case host.EventRuleNotify:
					ev.WebhookID = obj(rt, el+".webhook")
					ev.Subject = host.RuleSubject(obj(rt, el+".rule"), "acme/forge#1", 0)
				}
				txs[i].events = append(txs[i].events, ev)
			}
		}

		run := func(batched bool) (events, outbox []string) {
			reset(rt, false)
			for _, h := range txs {
				tx, err := pool.Begin(ctx)
				require.NoError(rt, err)
				if batched {
					batch := &pgx.Batch{}
					batch.Queue(`SELECT 1`)
					for _, ev := range h.events {
						require.NoError(rt, eng.QueueEmit(batch, ev))
					}
					require.NoError(rt, tx.SendBatch(ctx, batch).Close())
				} else {
					for _, ev := range h.events {
						require.NoError(rt, eng.Emit(ctx, tx, ev))
					}
				}
				if h.commit {
					require.NoError(rt, tx.Commit(ctx))
				} else {
					require.NoError(rt, tx.Rollback(ctx))
				}
			}
			return eventRows(t, b), outboxRows(rt)
		}
		wantEvents, wantOutbox := run(false)
		gotEvents, gotOutbox := run(true)
		require.Equal(rt, wantEvents, gotEvents, "outbox_events")
		require.Equal(rt, wantOutbox, gotOutbox, "outbox after fan-out")
	})
}
