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
