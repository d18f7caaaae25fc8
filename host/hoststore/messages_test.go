package hoststore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/hosttest"
)

// A delivery's message id is taken once: the statement that takes it draws
// the delivery's id, and a second take of the same id changes nothing.
// What a delivery reads before it (whether the id is taken, and the
// webhook's rules in order) comes in one round trip.
func TestAMessageIDIsTakenOnceAndDrawsItsDeliveryID(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	ctx := context.Background()
	f := hosttest.NewFactory(t, pool)
	wh := f.Webhook(hostid.Human(f.Human("")), "")
	for i, name := range []string{"second", "first"} {
		_, err := hoststore.InsertRule(ctx, pool, wh, hoststore.RuleWrite{Name: name, Expr: `.a`, Drop: true, Now: time.Now()})
		require.NoError(t, err, i)
	}
	f.Exec(`UPDATE webhook_rules SET position = CASE name WHEN 'first' THEN 1 ELSE 2 END WHERE webhook_id = $1`, wh)

	_, seen, rules, err := hoststore.MessageDeliveryAndRules(ctx, pool, wh, "msg_1")
	require.NoError(t, err)
	require.False(t, seen)
	require.Len(t, rules, 2)
	require.Equal(t, []string{"first", "second"}, []string{rules[0].Name, rules[1].Name}, "in their order")

	expires := time.Now().Add(time.Hour)
	var id int64
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var ok bool
		id, ok, err = hoststore.TakeMessageID(ctx, tx, wh, "msg_1", expires)
		require.True(t, ok)
		return err
	}))
	require.Positive(t, id)
	again, ok, err := hoststore.TakeMessageID(ctx, pool, wh, "msg_1", expires)
	require.NoError(t, err)
	require.False(t, ok, "the id is taken")
	require.Zero(t, again)
	other, ok, err := hoststore.TakeMessageID(ctx, pool, wh, "msg_2", expires)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, other, id, "each take draws a new delivery id")

	first, seen, _, err := hoststore.MessageDeliveryAndRules(ctx, pool, wh, "msg_1")
	require.NoError(t, err)
	require.True(t, seen)
	require.Equal(t, id, first, "the delivery the id was taken by")
}

// A delivery that writes nothing else takes its message id and stores
// itself in one statement: a repeat of the same id, sent while the first
// statement's transaction is open, waits for it, and then stores nothing
// and reports the id taken; so does a repeat sent after. The handler
// reads whether the id is taken before it, so only this wait keeps two
// repeats that pass that read together from failing or being stored
// twice (mutant quiet-delivery-message-once); here the overlap is made,
// not left to the scheduler.
func TestARepeatOfAQuietDeliveryWaitsForTheFirstAndStoresNothing(t *testing.T) {
	t.Parallel()
	pool := hosttest.New(t)
	ctx := context.Background()
	f := hosttest.NewFactory(t, pool)
	owner := hostid.Human(f.Human(""))
	wh := f.Webhook(owner, "")
	expires := time.Now().Add(time.Hour)
	row := hoststore.DeliveryRow{WebhookID: wh, Owner: owner.String(), ReceivedAt: time.Now(), Outcome: "unrouted",
		Payload: []byte(`{}`), Trace: []byte(`[]`)}

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	id, ok, err := hoststore.TakeMessageIDAndInsertDelivery(ctx, first, "msg_1", expires, row)
	require.NoError(t, err)
	require.True(t, ok)

	type result struct {
		id  int64
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, ok, err := hoststore.TakeMessageIDAndInsertDelivery(ctx, pool, "msg_1", expires, row)
		done <- result{id, ok, err}
	}()
	// The repeat waits for the first's transaction on the message id.
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO webhook_message_ids%')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond, "the repeat waits for the first")
	require.NoError(t, first.Commit(ctx))
	repeat := <-done
	require.NoError(t, repeat.err, "the repeat does not fail")
	require.False(t, repeat.ok, "the repeat finds the id taken")
	require.Zero(t, repeat.id)

	again, ok, err := hoststore.TakeMessageIDAndInsertDelivery(ctx, pool, "msg_1", expires, row)
	require.NoError(t, err)
	require.False(t, ok, "a later repeat finds it taken too")
	require.Zero(t, again)
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1`, wh).Scan(&stored))
	require.Equal(t, 1, stored)
	var named int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT delivery_id FROM webhook_message_ids WHERE webhook_id = $1 AND message_id = 'msg_1'`, wh).Scan(&named))
	require.Equal(t, id, named, "the id names the first's delivery")
}
