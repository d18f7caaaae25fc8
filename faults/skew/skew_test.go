package skew_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine/enginetest"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
)

// clockOff is an instance whose own clock is off by by.
var clockOff = enginetest.LocalClockOff

var (
	results = struct {
		sync.Mutex
		checks, held int
		dups         int
		pending      faults.Pending
		figures      []string
	}{}
	skews = []struct {
		name string
		by   time.Duration
	}{{"7 minutes", 7 * time.Minute}, {"a day", 24 * time.Hour}}
)

func TestMain(m *testing.M) {
	code := m.Run()
	results.Lock()
	row := faults.Row{
		Scenario:  "3b. clock skew (instances off by minutes and by a day)",
		Load:      fmt.Sprintf("%d checks: due times, claims, budgets", results.checks),
		Faults:    "an instance clock 7 min and 24 h ahead of the database",
		BadInputs: faults.NotApplicable, RowsLost: 0, Duplicates: results.dups,
		Figures: append([]string{fmt.Sprintf("%d of %d held exact", results.held, results.checks)}, results.figures...),
		Pending: results.pending.Notes(), Failed: code != 0,
	}
	results.Unlock()
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	results.Lock()
	results.checks++
	if ok {
		results.held++
	}
	results.Unlock()
	results.pending.Expect(t, "skew/db-clock", ok, format, args...)
}

// setup seeds one sink (its budget lifted unless perHour is set) at a
// receiver and returns it.
func setup(t *testing.T, w *hosttest.World, perHour int) (*faults.Receiver, int64) {
	t.Helper()
	token := faults.PlantedSecrets().GotifyToken
	recv := faults.NewReceiver(t, token)
	ids, err := faults.SeedSinks(context.Background(), w.Pool, w.Key, recv.URL, token, 1)
	require.NoError(t, err)
	if perHour > 0 {
		_, err = w.Pool.Exec(context.Background(), `UPDATE switchboard.sinks SET budget_per_hour = $1, budget_burst = 1 WHERE id = $2`, perHour, ids[0])
		require.NoError(t, err)
	}
	return recv, ids[0]
}

// An instance ahead of time does not claim a row before the database says
// it is due: a claim pass of the skewed instance, run at once, takes
// nothing; once the row is due on the database's clock, the same pass
// takes it.
func TestSkewDueTimes(t *testing.T) {
	t.Parallel()
	for _, sk := range skews {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			recv, sink := setup(t, w, 0)
			require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, []int64{sink}, 1))
			_, err := w.Pool.Exec(w.Ctx, `UPDATE switchboard.outbox SET due_at = now() + $1::interval`, sk.by/2)
			require.NoError(t, err)
			eng := w.Engine(clockOff(sk.by))
			early, err := testhooks.ClaimOnce(w.Ctx, eng) // the row is not due for sk.by/2
			require.NoError(t, err)
			check(t, len(early.Rows) == 0 && recv.DistinctRows() == 0, "an instance %s ahead claimed a row due in %v", sk.name, sk.by/2)

			// The database's clock reaches the due time: the same pass claims it.
			_, err = w.Pool.Exec(w.Ctx, `UPDATE switchboard.outbox SET due_at = now()`)
			require.NoError(t, err)
			due, err := testhooks.ClaimOnce(w.Ctx, eng)
			require.NoError(t, err)
			require.Len(t, due.Rows, 1, "the pass claims the row once it is due on the database's clock")
		})
	}
}

// An instance ahead of time does not take over a claim before it expires
// by the database's clock: the row is sent once.
func TestSkewClaims(t *testing.T) {
	t.Parallel()
	for _, sk := range skews {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			token := faults.PlantedSecrets().GotifyToken
			release := make(chan struct{})
			inner := faults.NewReceiver(t, token)
			slow := faults.NewSlowProxy(t, inner.URL, release)
			ids, err := faults.SeedSinks(w.Ctx, w.Pool, w.Key, slow.URL, token, 1)
			require.NoError(t, err)
			w.Serve(clockOff(0))
			require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, ids, 1))
			<-slow.Arrived // the true-time instance holds the row, mid-send
			// A claim pass of the skewed instance, which looks for expired
			// claims too, takes nothing.
			pass, err := testhooks.ClaimOnce(w.Ctx, w.Engine(clockOff(sk.by)))
			require.NoError(t, err)
			require.True(t, pass.SearchedExpired, "the pass looked for expired claims")
			stolen := len(pass.Rows) > 0
			close(release)
			_, err = w.SettleWithin(30 * time.Second)
			require.NoError(t, err)
			_, _, dups := inner.Counts()
			check(t, !stolen && dups == 0, "an instance %s ahead took over a live claim: %d sent twice", sk.name, dups)
			if dups > 0 {
				results.Lock()
				results.dups += dups
				results.figures = append(results.figures, fmt.Sprintf("%s ahead: %d row sent twice", sk.name, dups))
				results.Unlock()
			}
		})
	}
}

// An instance ahead of time finds no token the budget has not returned:
// a sink allowed one message an hour sends one, whichever instance tries.
func TestSkewBudgets(t *testing.T) {
	t.Parallel()
	for _, sk := range skews {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			w := hosttest.NewWorld(t)
			recv, sink := setup(t, w, 1)
			_, stop := w.Start(clockOff(0))
			require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, []int64{sink}, 1))
			require.Equal(t, "delivered", w.Wait().State)
			stop()
			w.Serve(clockOff(sk.by))
			require.NoError(t, faults.InsertRows(w.Ctx, w.Pool, []int64{sink}, 1))
			a, attempted := w.NextAttempt(5 * time.Second)
			sent := attempted && a.State == "delivered"
			check(t, !sent && recv.DistinctRows() == 1, "an instance %s ahead sent a second message within the hour of a 1/h budget (%d received)", sk.name, recv.DistinctRows())
		})
	}
}
