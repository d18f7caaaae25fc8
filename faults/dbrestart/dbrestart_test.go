package dbrestart_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/faults/pgcluster"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// Scenario 2: the database restarts, then loses every connection, under a
// draining engine; then it is down while a digest falls due.
func TestDatabaseRestartMidDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rows, sinkCount := 1000, 8
	if faults.Full() {
		rows, sinkCount = 5000, 16
	}
	var pending faults.Pending
	row := faults.Row{
		Scenario:  "2. database restart (private cluster)",
		Load:      fmt.Sprintf("%d due rows, %d sinks, 1 engine", rows, sinkCount),
		Faults:    "pg_ctl restart -m fast mid-drain, then pg_terminate_backend of every connection, then pg_ctl stop across a digest's time",
		BadInputs: faults.NotApplicable, RowsLost: faults.NotApplicable,
	}
	defer func() { row.Pending = append(row.Pending, pending.Notes()...); faults.Report(t, row) }()

	cluster := pgcluster.Start(t)
	const db = "switchboard"
	require.NoError(t, cluster.CreateDatabase(ctx, db))
	pool, err := pgxpool.New(ctx, cluster.URL(db))
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, host.Migrate(ctx, pool))

	secrets := faults.PlantedSecrets()
	recv := faults.NewReceiver(t, secrets.GotifyToken)
	key, _ := faults.NewKey()
	sinks, err := faults.SeedSinks(ctx, pool, key, recv.URL, secrets.GotifyToken, sinkCount)
	require.NoError(t, err)

	// The engine has a pool of its own, as a serving instance would.
	enginePool, err := pgxpool.New(ctx, cluster.URL(db))
	require.NoError(t, err)
	defer enginePool.Close()
	logs := &enginetest.SyncBuffer{}
	eng, err := engine.New(engine.Config{
		Pool: enginePool, Directory: host.NewDirectory(enginePool), Events: host.Events(), Links: host.Links(), SecretKey: key, PushAllowHTTP: true,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		ClaimTTL:     3 * time.Second, PollInterval: 200 * time.Millisecond,
		Retention: time.Hour, JanitorInterval: 300 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	require.NoError(t, err)
	dgs := digests.New(eng, digests.Config{Interval: 200 * time.Millisecond})
	engineCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(engineCtx) }()
	defer func() {
		stop()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine stopped with: %v", err)
		}
	}()

	require.NoError(t, faults.InsertRows(ctx, pool, sinks, rows))
	began := time.Now()
	reached := func(n int) func() (bool, error) {
		return func() (bool, error) { return recv.DistinctRows() >= n, nil }
	}

	require.NoError(t, faults.WaitUntil(time.Minute, 10*time.Millisecond, reached(rows/4)))
	restartAt := time.Now()
	cluster.Restart()
	restartTook := time.Since(restartAt)
	at := recv.DistinctRows()
	require.NoError(t, faults.WaitUntil(time.Minute, 10*time.Millisecond, reached(min(rows, at+rows/4))),
		"no progress after the restart")
	resumedAfter := time.Since(restartAt)

	killed, err := cluster.TerminateBackends(ctx, db)
	require.NoError(t, err)
	killedAt := time.Now()

	// pool (the test's own) lost its connections too; it reconnects.
	require.NoError(t, faults.WaitUntil(2*time.Minute, 50*time.Millisecond, func() (bool, error) {
		tally, err := faults.CountRows(ctx, pool)
		if err != nil {
			return false, nil // a killed connection of our own pool: ask again
		}
		return tally.Open == 0, nil
	}), "the outbox never drained after the faults")
	drained, afterKill := time.Since(began), time.Since(killedAt)

	seen, _, dups := recv.Counts()
	lost, err := faults.Lost(ctx, pool, seen)
	require.NoError(t, err)
	row.RowsLost, row.Duplicates = lost, dups
	require.Zero(t, lost, "rows lost")
	tally, err := faults.CountRows(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, rows, tally.Delivered, "every row delivered: %+v", tally)

	// The LISTEN connection is back.
	require.NoError(t, faults.WaitUntil(time.Minute, 100*time.Millisecond, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN %'`, db).Scan(&n)
		return n > 0, err
	}), "the engine never listened again")

	// A digest falls due while the database is down: it is sent once the
	// engine is back, and only once.
	digestFigure := digestAcrossOutage(t, ctx, cluster, pool, dgs, recv, sinks[0], &pending)

	// The janitor resumes: history past retention goes.
	_, err = pool.Exec(ctx, `INSERT INTO switchboard.delivery_records (sink_id, owner, event_type, status, sent_at, finished_at)
		SELECT id, owner, 'agent.notify', 'delivered', now() - interval '2 hours', now() - interval '2 hours' FROM switchboard.sinks LIMIT 1`)
	require.NoError(t, err)
	require.NoError(t, faults.WaitUntil(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.delivery_records WHERE sent_at < now() - interval '1 hour'`).Scan(&n)
		return n == 0, err
	}), "the janitor did not remove history past retention after the faults")

	dump, err := faults.DumpTables(ctx, pool)
	require.NoError(t, err)
	row.SecretsFound = faults.CountCanary(logs.String(), dump)
	require.Zero(t, row.SecretsFound)

	claimLost := strings.Count(logs.String(), "claim lost")
	recordErrors := strings.Count(logs.String(), "error recording delivery")
	row.Figures = append(row.Figures,
		fmt.Sprintf("restart took %.1f s; delivery resumed %.1f s after it began", restartTook.Seconds(), resumedAfter.Seconds()),
		fmt.Sprintf("%d connections killed; drained %d rows in %.1f s, %.1f s after the kill", killed, rows, drained.Seconds(), afterKill.Seconds()),
		fmt.Sprintf("%d duplicates (rows sent whose record the fault cut off: at least once), %d attempts not recorded, %d claims lost", dups, recordErrors, claimLost),
		digestFigure,
		"LISTEN connection re-established; janitor removed history past retention after the faults")
}

// digestAcrossOutage makes a digest of sink's owner due at the next minute
// (the schedule's grain), stops the cluster a few seconds before that
// minute and starts it again a few seconds after, so the digest's time
// passes while the engine has no database. Checked: nothing was sent
// before the outage; once the engine reconnects by itself its scheduler
// sends the digest, exactly once (one run, one outbox row, one message at
// the receiver), and a further pass claims nothing.
func digestAcrossOutage(t *testing.T, ctx context.Context, cluster *pgcluster.Cluster, pool *pgxpool.Pool,
	dgs *digests.Service, recv *faults.Receiver, sink int64, pending *faults.Pending) string {
	t.Helper()
	const before, after = 5 * time.Second, 2 * time.Second
	var ownerText string
	require.NoError(t, pool.QueryRow(ctx, `SELECT owner FROM switchboard.sinks WHERE id = $1`, sink).Scan(&ownerText))
	owner, err := notifytype.ParseOwnerScope(ownerText)
	require.NoError(t, err)
	p := engine.HumanPrincipal(owner.ID)

	// The slot: the first whole minute, on the database's clock, far
	// enough ahead to stop the cluster before it.
	var dbNow time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow))
	offset := dbNow.Sub(time.Now()) // the database's clock against ours (the same host: about 0)
	slot := dbNow.UTC().Truncate(time.Minute).Add(time.Minute)
	if slot.Sub(dbNow) < before+2*time.Second {
		slot = slot.Add(time.Minute)
	}
	quiet := false
	d, err := dgs.Create(ctx, p, digests.Input{
		Owner: owner, Name: "across the outage", Schedule: fmt.Sprintf("* %02d:%02d", slot.Hour(), slot.Minute()),
		SinkIDs: []int64{sink}, SkipWhenQuiet: &quiet,
	})
	require.NoError(t, err)
	require.True(t, d.NextSendAt.Equal(slot), "the digest's next send %v, want %v", d.NextSendAt, slot)

	// The schedule is wall-clock time: wait for it, on the wall clock.
	wallUntil(slot.Add(-offset).Add(-before))
	runs := func() (int, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.digest_runs WHERE digest_id = $1`, d.ID).Scan(&n)
		return n, err
	}
	n, err := runs()
	require.NoError(t, err)
	require.Zero(t, n, "the digest ran before its time")
	cluster.Stop()
	stoppedAt := time.Now()
	require.True(t, stoppedAt.Add(offset).Before(slot), "the cluster took until %v to stop, past the digest's time %v", stoppedAt.Add(offset), slot)
	wallUntil(slot.Add(-offset).Add(after))
	// The database may take work before pg_ctl returns: the digest must run
	// after the start began, which is as late as it could have run earlier.
	startingAt := time.Now()
	cluster.StartAgain()
	upAt := time.Now()

	// Sent once the engine is back: one run, one row delivered.
	require.NoError(t, faults.WaitUntil(time.Minute, 50*time.Millisecond, func() (bool, error) {
		var delivered int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest' AND state = 'delivered'`).Scan(&delivered)
		if err != nil {
			return false, nil // a connection of our own pool the outage cut: ask again
		}
		return delivered > 0, nil
	}), "the digest due during the outage was never delivered after it")
	sentAfter := time.Since(upAt)
	// Further passes of the scheduler, and one of our own, claim nothing.
	claimed, err := dgs.RunDue(ctx)
	require.NoError(t, err)
	var (
		kind, outcome string
		slotAt, ranAt time.Time
		digestRows    int
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.digest_runs WHERE digest_id = $1`, d.ID).Scan(&n))
	require.NoError(t, pool.QueryRow(ctx, `SELECT kind, outcome, slot_at, ran_at FROM switchboard.digest_runs WHERE digest_id = $1`, d.ID).
		Scan(&kind, &outcome, &slotAt, &ranAt))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE event_type = 'digest'`).Scan(&digestRows))
	messages := 0
	for title, c := range recv.OtherTitles() {
		if strings.HasPrefix(title, "Queue digest: ") {
			messages += c
		}
	}
	ok := n == 1 && kind == "scheduled" && outcome == "sent" && slotAt.Equal(slot) && ranAt.After(startingAt.Add(offset)) &&
		digestRows == 1 && messages == 1 && claimed == 0
	pending.Expect(t, "dbrestart/digest-scheduler", ok,
		"digest due at %s during the outage: %d runs (first: %s %s, slot %v, ran %v after the database began to start), %d outbox rows, %d messages, a later pass claimed %d",
		slot.Format("15:04"), n, kind, outcome, slotAt.Format("15:04:05"), ranAt.Sub(startingAt.Add(offset)), digestRows, messages, claimed)
	return fmt.Sprintf("digest due at %s UTC while the database was down (stopped %.1f s before, started %.1f s after): "+
		"sent once, delivered %.1f s after the database came back; a later pass claimed nothing",
		slot.Format("15:04"), slot.Sub(stoppedAt.Add(offset)).Seconds(), upAt.Add(offset).Sub(slot).Seconds(), sentAfter.Seconds())
}

// wallUntil waits until the wall clock reads at: the digest's schedule is
// a time of day, which only the wall clock reaches.
func wallUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		<-t.C
	}
}
