package liveness_test

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
	"github.com/switchboard/notify/host/hosttest"
)

// pauseFor is how long the database is frozen: a failover's worth.
const pauseFor = 30 * time.Second

// startEngine serves an engine of its own pool on url until the test ends.
func startEngine(t *testing.T, ctx context.Context, url string, key []byte, name string, logs *enginetest.SyncBuffer,
	configure func(*engine.Config)) (*engine.Engine, func(context.Context) error) {
	t.Helper()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	cfg := engine.Config{
		Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(), SecretKey: key, PushAllowHTTP: true, Instance: name,
		PrivateHosts: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, PollInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)).With("instance", name),
	}
	if configure != nil {
		configure(&cfg)
	}
	eng, err := engine.New(cfg)
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	stopped := false
	stop := func(ctx context.Context) error {
		err := eng.Stop(ctx)
		if err == nil || errors.As(err, new(*engine.StopError)) {
			stopped = true
		}
		return err
	}
	t.Cleanup(func() {
		if !stopped {
			if err := eng.Stop(context.Background()); err != nil {
				t.Errorf("%s stopped with: %v", name, err)
			}
		}
		pool.Close()
	})
	return eng, stop
}

// Scenario 9a: a database frozen 30 s under three instances.
func TestDatabasePausedUnderThreeInstances(t *testing.T) {
	t.Parallel()
	pausedUnderThree(t, "9a. database paused 30 s under three instances (private cluster)",
		"SIGSTOP of the postmaster and every backend mid-drain, SIGCONT 30 s later: every heartbeat lapses",
		func(c *pgcluster.Cluster) (int, func()) { return c.Pause(), c.Resume })
}

// Scenario 9c: a failover's worth of outage under three instances: every
// connection is cut and the server is away 30 s, so what each instance
// had under way must be written again over a new connection, racing the
// others' claims.
func TestDatabaseFailoverUnderThreeInstances(t *testing.T) {
	t.Parallel()
	pausedUnderThree(t, "9c. database away 30 s under three instances (private cluster, as a failover)",
		"pg_ctl stop -m fast mid-drain (every connection cut), pg_ctl start 30 s later: every heartbeat lapses",
		func(c *pgcluster.Cluster) (int, func()) { c.Stop(); return 0, c.StartAgain })
}

// pausedUnderThree drains rows with three engines, applies pause for
// pauseFor, and checks that nothing delivered before the database came
// back is sent again.
func pausedUnderThree(t *testing.T, scenario, fault string, pause func(*pgcluster.Cluster) (int, func())) {
	ctx := context.Background()
	rows, sinkCount := 600, 12
	if faults.Full() {
		rows, sinkCount = 3000, 24
	}
	row := faults.Row{
		Scenario:  scenario,
		Load:      fmt.Sprintf("%d due rows, %d sinks, 3 engines (default heartbeat: 5 s, TTL 20 s, fence 23 s)", rows, sinkCount),
		Faults:    fault,
		BadInputs: faults.NotApplicable, RowsLost: faults.NotApplicable,
	}
	defer func() { faults.Report(t, row) }()

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

	logs := &enginetest.SyncBuffer{}
	for i := range 3 {
		startEngine(t, ctx, cluster.URL(db), key, fmt.Sprintf("paused-%d", i), logs, nil)
	}
	require.NoError(t, faults.InsertRows(ctx, pool, sinks, rows))
	require.NoError(t, faults.WaitUntil(2*time.Minute, 10*time.Millisecond, func() (bool, error) {
		return recv.DistinctRows() >= rows/4, nil
	}), "the drain did not begin")

	pausedAt := time.Now()
	before, _, _ := recv.Counts()
	frozen, resume := pause(cluster)
	<-time.After(pauseFor - time.Since(pausedAt)) // the fault's length
	during, _, _ := recv.Counts()
	resume()
	resumedAt := time.Now()

	require.NoError(t, faults.WaitUntil(3*time.Minute, 50*time.Millisecond, func() (bool, error) {
		tally, err := faults.CountRows(ctx, pool)
		if err != nil {
			return false, nil // a connection of our own pool the pause cut: ask again
		}
		return tally.Open == 0, nil
	}), "the outbox never drained after the pause: %s", faults.DescribeOpen(ctx, pool))
	drained := time.Since(resumedAt)

	seen, _, dups := recv.Counts()
	lost, err := faults.Lost(ctx, pool, seen)
	require.NoError(t, err)
	row.RowsLost, row.Duplicates = lost, dups
	resentBefore, resentDuring := 0, 0
	for id, n := range seen {
		switch {
		case n > 1 && before[id] > 0:
			resentBefore++
		case n > 1 && during[id] > 0:
			resentDuring++
		}
	}
	takeovers := strings.Count(logs.String(), "redelivering an abandoned attempt")
	row.Figures = append(row.Figures,
		fmt.Sprintf("%d server processes frozen; the database away %.1f s; %d rows delivered before the pause, %d more while it lasted (sends in flight)",
			frozen, resumedAt.Sub(pausedAt).Seconds(), len(before), len(during)-len(before)),
		fmt.Sprintf("%d of them sent again (%d delivered before the pause, %d during it); %d abandoned attempts taken over",
			resentBefore+resentDuring, resentBefore, resentDuring, takeovers),
		fmt.Sprintf("drained the rest in %.1f s after the pause", drained.Seconds()))
	require.Zero(t, lost, "rows lost")
	require.Zero(t, resentBefore, "rows delivered before the pause were sent again")
	require.Zero(t, resentDuring, "rows delivered while the database was paused were sent again")
	dump, err := faults.DumpTables(ctx, pool)
	require.NoError(t, err)
	row.SecretsFound = faults.CountCanary(logs.String(), dump)
	require.Zero(t, row.SecretsFound)
}

// Scenario 9b: a stop past its bound is reported, and nothing is resent.
func TestStopPastItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rows, sinkCount := 200, 8
	row := faults.Row{
		Scenario: "9b. stop past its bound",
		Load:     fmt.Sprintf("%d due rows, %d sinks, 1 engine stopped mid-drain, then a second engine", rows, sinkCount),
		Faults: "every delivery record locked by another connection (LOCK TABLE … EXCLUSIVE) across the stop; " +
			"Stop given 2 s; the lock released 6 s into the stop",
		BadInputs: faults.NotApplicable, RowsLost: faults.NotApplicable,
	}
	defer func() { faults.Report(t, row) }()

	w := hosttest.NewWorld(t)
	secrets := faults.PlantedSecrets()
	recv := faults.NewReceiver(t, secrets.GotifyToken)
	sinks, err := faults.SeedSinks(ctx, w.Pool, w.Key, recv.URL, secrets.GotifyToken, sinkCount)
	require.NoError(t, err)
	logs := &enginetest.SyncBuffer{}
	_, stop := startEngine(t, ctx, w.URL, w.Key, "stopping", logs, nil)
	require.NoError(t, faults.InsertRows(ctx, w.Pool, sinks, rows))
	require.NoError(t, faults.WaitUntil(time.Minute, 5*time.Millisecond, func() (bool, error) {
		return recv.DistinctRows() >= rows/10, nil
	}), "the drain did not begin")

	lock, err := w.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `LOCK TABLE switchboard.delivery_records IN EXCLUSIVE MODE`)
	require.NoError(t, err)
	stopAt := time.Now()
	bounded, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = stop(bounded)
	cancel()
	reportedAfter := time.Since(stopAt)
	require.Error(t, err, "a stop past its caller's bound is reported")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	reported := err.Error()

	<-time.After(6*time.Second - time.Since(stopAt)) // the fault's length
	require.NoError(t, lock.Rollback(ctx))
	err = stop(ctx) // waits for the rest of the stop
	finished := time.Since(stopAt)
	require.NoError(t, err, "once the lock is gone the stop records and releases everything")

	_, stop2 := startEngine(t, ctx, w.URL, w.Key, "taking-over", logs, nil)
	require.NoError(t, faults.WaitUntil(2*time.Minute, 20*time.Millisecond, func() (bool, error) {
		tally, err := faults.CountRows(ctx, w.Pool)
		return err == nil && tally.Open == 0, err
	}), "the outbox never drained after the stop: %s", faults.DescribeOpen(ctx, w.Pool))
	require.NoError(t, stop2(ctx))

	seen, _, dups := recv.Counts()
	lost, err := faults.Lost(ctx, w.Pool, seen)
	require.NoError(t, err)
	row.RowsLost, row.Duplicates = lost, dups
	row.Figures = append(row.Figures,
		fmt.Sprintf("Stop(2 s) reported %q after %.1f s; the stop finished %.1f s after it began, clean", reported, reportedAfter.Seconds(), finished.Seconds()),
		fmt.Sprintf("%d rows sent again", dups))
	require.Zero(t, lost, "rows lost")
	require.Zero(t, dups, "rows sent again after the stop")
	dump, err := faults.DumpTables(ctx, w.Pool)
	require.NoError(t, err)
	row.SecretsFound = faults.CountCanary(logs.String(), dump)
	require.Zero(t, row.SecretsFound)
}
