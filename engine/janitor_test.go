package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// The history that would otherwise grow without bound (the write log,
// digest runs, received webhook deliveries with their traces and the
// quarantine) is kept for the retention period, 30 days as delivery
// records (REQ-10), and removed after it in bounded batches; a row 29
// days old stays.
func TestJanitorPrunesHistoryPastRetention(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	// Batches of 2: every table below has more old rows than one batch.
	eng := w.Engine(func(c *engine.Config) { c.JanitorBatch = 2 })
	h := w.F.Human("")
	scope := hostid.Human(h)
	hook := w.F.Webhook(scope, "forge")
	var digest int64
	require.NoError(t, w.Pool.QueryRow(w.Ctx, `INSERT INTO switchboard.digests (owner, name, schedule) VALUES ($1, 'morning', 'daily 09:00')
		RETURNING id`, scope.String()).Scan(&digest))

	day := 24 * time.Hour
	ages := []time.Duration{90 * day, 31 * day, 30*day + time.Minute, 29 * day, time.Hour} // 3 old, 2 kept
	for i, age := range ages {
		at := w.Clock.Now().Add(-age)
		_, err := w.Pool.Exec(w.Ctx, `INSERT INTO switchboard.write_log (at, owner, action, object_kind, object_id, acting_human_id)
			VALUES ($1, $2, 'sink.create', 'sink', $3, $4)`, at, scope.String(), i+1, hostid.String(h))
		require.NoError(t, err)
		_, err = w.Pool.Exec(w.Ctx, `INSERT INTO switchboard.digest_runs (digest_id, owner, kind, outcome, slot_at, ran_at)
			VALUES ($1, $2, 'scheduled', 'sent', $3, $3)`, digest, scope.String(), at)
		require.NoError(t, err)
		_, err = w.Pool.Exec(w.Ctx, `INSERT INTO webhook_deliveries (webhook_id, owner, received_at, outcome, payload, trace)
			VALUES ($1, $2, $3, $4, '{"issue":{"body":"sender text"}}', '{"trusted":false}')`,
			hook, scope.String(), at, []string{"quarantined", "routed"}[i%2])
		require.NoError(t, err)
	}

	require.NoError(t, eng.CleanUp(w.Ctx))

	cutoff := w.Clock.Now().Add(-engine.RetentionDefault)
	for table, column := range map[string]string{"write_log": "at", "digest_runs": "ran_at", "webhook_deliveries": "received_at"} {
		require.Equal(t, 2, w.F.Count(`SELECT count(*) FROM `+storetest.Table(table)), "%s: the two rows younger than 30 days stay", table)
		require.Zero(t, w.F.Count(`SELECT count(*) FROM `+storetest.Table(table)+` WHERE `+column+` < $1`, cutoff), "%s: nothing older than 30 days", table)
	}
	require.Contains(t, w.Logs.String(), `"msg":"removed expired history","write_log":3,"digest_runs":3`)
	require.Contains(t, w.Logs.String(), `"msg":"removed expired webhook deliveries","webhook_deliveries":3`, "the host's clean-up runs under the janitor")
	require.NotContains(t, w.Logs.String(), "sender text", "the log counts rows, never their content")

	// Time passes: the 29-day-old rows cross the line on the next run.
	w.Clock.Advance(2 * day)
	require.NoError(t, eng.CleanUp(w.Ctx))
	for _, table := range []string{"write_log", "digest_runs", "webhook_deliveries"} {
		require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM `+storetest.Table(table)), "%s: only the newest row is left", table)
	}
}

// One instance at a time cleans up: while another session holds the
// janitor's lock, CleanUp removes nothing and says no error; once the lock
// is free, it cleans up and gives the lock back.
func TestJanitorSkipsWhileAnotherInstanceCleansUp(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	eng := w.Engine()
	old := w.Clock.Now().Add(-40 * 24 * time.Hour)
	_, err := w.Pool.Exec(w.Ctx, `INSERT INTO switchboard.write_log (at, owner, action, object_kind, object_id) VALUES ($1, 'human:1', 'sink.create', 'sink', 1)`, old)
	require.NoError(t, err)

	other, err := w.Pool.Acquire(w.Ctx)
	require.NoError(t, err)
	defer other.Release()
	_, err = other.Exec(w.Ctx, `SELECT pg_advisory_lock($1, $2)`, store.LockFamilyJanitor, engine.JanitorLockKeyForTest)
	require.NoError(t, err)
	require.NoError(t, eng.CleanUp(w.Ctx))
	require.Equal(t, 1, w.F.Count(`SELECT count(*) FROM switchboard.write_log`), "another instance holds the lock: nothing removed here")

	_, err = other.Exec(w.Ctx, `SELECT pg_advisory_unlock($1, $2)`, store.LockFamilyJanitor, engine.JanitorLockKeyForTest)
	require.NoError(t, err)
	require.NoError(t, eng.CleanUp(w.Ctx))
	require.Zero(t, w.F.Count(`SELECT count(*) FROM switchboard.write_log`))

	var free bool
	require.NoError(t, other.QueryRow(w.Ctx, `SELECT pg_try_advisory_lock($1, $2)`, store.LockFamilyJanitor, engine.JanitorLockKeyForTest).Scan(&free))
	require.True(t, free, "CleanUp gave its lock back")
	_, err = other.Exec(w.Ctx, `SELECT pg_advisory_unlock($1, $2)`, store.LockFamilyJanitor, engine.JanitorLockKeyForTest)
	require.NoError(t, err)
}
