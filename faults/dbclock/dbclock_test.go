package dbclock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

var results = struct {
	sync.Mutex
	rows, lost, hung int
	figures          []string
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	results.Lock()
	row := faults.Row{
		Scenario:  "3d. database clock (a full pool of 2; a sender's clock a day off)",
		Load:      fmt.Sprintf("%d rows delivered through a pool of 2, digests from instances ±24 h off", results.rows),
		Faults:    "both connections held by host transactions as a clock reading falls due; local clock ±24 h",
		BadInputs: faults.NotApplicable, RowsLost: results.lost, Duplicates: 0,
		Figures: append([]string{fmt.Sprintf("%d callers left waiting", results.hung)}, results.figures...),
		Failed:  code != 0,
	}
	results.Unlock()
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func figure(format string, args ...any) {
	results.Lock()
	defer results.Unlock()
	results.figures = append(results.figures, fmt.Sprintf(format, args...))
}

// bound is how long (wall time) any one wait of the scenario may take: a
// wait past it is a hang, and fails the scenario.
const bound = 10 * time.Second

// within runs f on a goroutine and reports its error, or fails the test
// when f has not returned within bound (the old clock's hang).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		results.Lock()
		results.hung++
		results.Unlock()
		t.Fatalf("%s: still waiting after %v", what, bound)
		return nil
	}
}

// An engine whose pool of two is held by two host transactions when its
// clock reading falls due: an Emit in one of them goes through, callers
// with a deadline get their ctx's error in time, and once the
// transactions end every row queued meanwhile is delivered.
func TestFullPool(t *testing.T) {
	t.Parallel()
	w := hosttest.NewWorld(t)
	token := faults.PlantedSecrets().GotifyToken
	recv := faults.NewReceiver(t, token)
	ids, err := faults.SeedSinks(w.Ctx, w.Pool, w.Key, recv.URL, token, 1)
	require.NoError(t, err)

	pcfg, err := pgxpool.ParseConfig(w.URL)
	require.NoError(t, err)
	pcfg.MaxConns = 2
	signal := enginetest.NewAcquireSignal(64)
	pcfg.ConnConfig.Tracer = signal
	pool, err := pgxpool.NewWithConfig(w.Ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	local := clockwork.NewFakeClockAt(time.Now())
	eng, err := engine.New(w.Config(pool, func(c *engine.Config) {
		c.Clock = local
		testhooks.SetDatabaseClock(c, nil) // the database's own clock, read through the pool
	}))
	require.NoError(t, err)
	// The first row is queued before the engine starts. The engine's
	// database time is its last reading of the database's clock plus the
	// time since on its local clock, which is fake here and stands still
	// until the test moves it: from the reading its start takes (the first
	// beat) to the test's first Advance, the engine's now does not move. A
	// row queued after that reading, due at its transaction's now(), would
	// not be due on the engine's clock before that Advance, and would not be
	// delivered; queued before the start, it is due on the first reading.
	require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, ids, 1))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-served:
		case <-time.After(engine.StopTimeoutDefault + bound):
			t.Error("the engine did not stop")
		}
	})
	require.Equal(t, "delivered", w.Wait().State, "delivers before the fault")

	// Two host transactions hold the pool; then a clock reading falls due
	// and some caller of the engine waits for a connection.
	var txs []pgx.Tx
	for range 2 {
		tx, err := pool.Begin(w.Ctx)
		require.NoError(t, err)
		txs = append(txs, tx)
	}
	t.Cleanup(func() {
		for _, tx := range txs {
			_ = tx.Rollback(context.Background())
		}
	})
	for len(signal.Started) > 0 {
		<-signal.Started
	}
	local.Advance(2 * time.Minute)
	select {
	case <-signal.Started:
	case <-time.After(bound):
		t.Fatal("no caller of the engine asked the full pool for a connection")
	}

	// An Emit in the host's transaction reads the clock through it.
	_, _, scope := w.Human()
	err = within(t, "an Emit in the host's transaction", func() error {
		ectx, ecancel := context.WithTimeout(w.Ctx, 5*time.Second)
		defer ecancel()
		return eng.Emit(ectx, txs[0], engine.Event{Type: engine.EventAgentNotify, Owner: scope,
			Content: sinks.Content{Title: "paged during a full pool"}})
	})
	require.NoError(t, err)
	// Callers with a deadline get their ctx's error in time.
	const callers = 4
	for i := range callers {
		err := within(t, fmt.Sprintf("caller %d with a 200 ms deadline", i), func() error {
			cctx, ccancel := context.WithTimeout(w.Ctx, 200*time.Millisecond)
			defer ccancel()
			_, err := testhooks.FanOut(cctx, eng)
			return err
		})
		require.True(t, errors.Is(err, context.DeadlineExceeded), "caller %d: %v", i, err)
	}
	figure("with the pool full: an Emit in the host's transaction went through; %d callers with a 200 ms deadline returned its error", callers)

	// Rows queued meanwhile are delivered once the transactions end.
	const queued = 5
	require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, ids, queued))
	for _, tx := range txs {
		require.NoError(t, tx.Commit(w.Ctx))
	}
	freed := time.Now()
	// The engine measures the database's time on its (fake) local clock
	// since its last reading: move it on so that its next reading is due
	// again and the rows just queued are due on it.
	local.Advance(2 * time.Minute)
	for range queued {
		require.Equal(t, "delivered", w.Wait().State)
	}
	lost, err := faults.Lost(w.Ctx, w.Pool, mapOf(recv))
	require.NoError(t, err)
	results.Lock()
	results.rows += queued + 1
	results.lost += lost
	results.Unlock()
	figure("the pool freed: %d rows queued meanwhile delivered %.1f s later", queued, time.Since(freed).Seconds())
	require.Zero(t, lost)
}

func mapOf(r *faults.Receiver) map[int64]int {
	seen, _, _ := r.Counts()
	return seen
}

// A digest sent by an instance a day ahead or behind is due at the
// database's time.
func TestDigestDueAtTheDatabasesTime(t *testing.T) {
	t.Parallel()
	for _, by := range []time.Duration{24 * time.Hour, -24 * time.Hour} {
		t.Run(by.String(), func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			token := faults.PlantedSecrets().GotifyToken
			recv := faults.NewReceiver(t, token)
			ids, err := faults.SeedSinks(w.Ctx, w.Pool, w.Key, recv.URL, token, 1)
			require.NoError(t, err)
			var owner string
			require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT owner FROM switchboard.sinks WHERE id = $1`, ids[0]).Scan(&owner))
			scope, err := notifytype.ParseOwnerScope(owner)
			require.NoError(t, err)
			require.Equal(t, notifytype.ScopeHuman, scope.Kind)
			p := engine.HumanPrincipal(scope.ID)
			dgs := digests.New(w.Engine(enginetest.LocalClockOff(by)), digests.Config{})
			dg, err := dgs.Create(w.Ctx, p, digests.Input{Owner: scope, Name: "skewed", Schedule: "TZ=UTC * 09:00", SinkIDs: ids})
			require.NoError(t, err)
			var before, after, due time.Time
			require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT clock_timestamp()`).Scan(&before))
			_, err = dgs.SendNow(w.Ctx, p, dg.ID)
			require.NoError(t, err)
			require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT clock_timestamp()`).Scan(&after))
			require.NoError(t, w.Pool.QueryRow(w.Ctx, `SELECT due_at FROM switchboard.outbox WHERE event_type = 'digest'`).Scan(&due))
			ok := !due.Before(before) && !due.After(after)
			require.True(t, ok, "an instance %v off queued a digest due at %v; the database's time was %v", by, due, before)
			figure("digest from an instance %s off: due at the database's time (%s)", strings.TrimSuffix(by.String(), "0m0s"), "within the send's statement")
		})
	}
}
