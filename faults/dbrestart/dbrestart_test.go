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
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/faults/pgcluster"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/store"
)

// Scenario 2: the database restarts, then loses every connection, under a
// draining engine.
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
		Faults:    "pg_ctl restart -m fast mid-drain, then pg_terminate_backend of every connection",
		BadInputs: faults.NotApplicable, RowsLost: faults.NotApplicable,
	}
	defer func() { row.Pending = append(row.Pending, pending.Notes()...); faults.Report(t, row) }()

	cluster := pgcluster.Start(t)
	const db = "switchboard"
	require.NoError(t, cluster.CreateDatabase(ctx, db))
	pool, err := pgxpool.New(ctx, cluster.URL(db))
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, store.Migrate(ctx, pool))

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
		Pool: enginePool, Directory: host.NewDirectory(enginePool), SecretKey: key, PushAllowHTTP: true,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		ClaimTTL:     3 * time.Second, PollInterval: 200 * time.Millisecond,
		Retention: time.Hour, JanitorInterval: 300 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	require.NoError(t, err)
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

	// The janitor resumes: history past retention goes.
	_, err = pool.Exec(ctx, `INSERT INTO delivery_records (sink_id, owner, event_type, status, sent_at, finished_at)
		SELECT id, owner, 'agent.notify', 'delivered', now() - interval '2 hours', now() - interval '2 hours' FROM sinks LIMIT 1`)
	require.NoError(t, err)
	require.NoError(t, faults.WaitUntil(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM delivery_records WHERE sent_at < now() - interval '1 hour'`).Scan(&n)
		return n == 0, err
	}), "the janitor did not remove history past retention after the faults")
	pending.Note(t, "dbrestart/digest-scheduler")

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
		"LISTEN connection re-established; janitor removed history past retention after the faults")
}
