package sinktest_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/sinktest"
)

// recordingTB is a testing.TB whose failures are recorded, not reported,
// so a test can prove that a check fails.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Errorf(string, ...any)     { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recordingTB) FailNow()                  { r.mu.Lock(); r.failed = true; r.mu.Unlock(); panic(errFailNow) }
func (r *recordingTB) Failed() bool              { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recordingTB) Fatalf(f string, a ...any) { r.Errorf(f, a...); r.FailNow() }

var errFailNow = errors.New("FailNow")

// fails reports whether check fails on a recording TB.
func fails(t *testing.T, check func(testing.TB)) bool {
	rec := &recordingTB{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != errFailNow {
				panic(p)
			}
		}()
		check(rec)
	}()
	return rec.Failed()
}

func TestLeakCheckCatchesEachCanary(t *testing.T) {
	t.Parallel()

	c := sinktest.NewCanaries()
	for _, secret := range append([]string{c.GotifyToken, c.Authorization, c.MessageBody}, c.AppriseURLs...) {
		leaky := sinks.Result{Class: notifytype.ClassAuth, Err: fmt.Errorf("server said: %s", secret)}
		require.True(t, fails(t, func(tb testing.TB) {
			var capture sinktest.Capture
			capture.RecordResult("sink", leaky)
			sinktest.RequireNoLeak(tb, c, &capture)
		}), "the check missed %q", secret)
	}

	// A leak only through a log line, or deep in an error chain.
	require.True(t, fails(t, func(tb testing.TB) {
		var capture sinktest.Capture
		capture.Logger().Debug("x", "auth", c.Authorization)
		sinktest.RequireNoLeak(tb, c, &capture)
	}))
	require.True(t, fails(t, func(tb testing.TB) {
		var capture sinktest.Capture
		capture.Record(errors.Join(errors.New("a"), fmt.Errorf("b: %w", errors.New(c.AppriseURLs[1]))))
		sinktest.RequireNoLeak(tb, c, &capture)
	}))
}

func TestLeakCheckRefusesAnEmptyCapture(t *testing.T) {
	t.Parallel()

	require.True(t, fails(t, func(tb testing.TB) {
		sinktest.RequireNoLeak(tb, sinktest.NewCanaries(), &sinktest.Capture{})
	}))
	require.False(t, fails(t, func(tb testing.TB) {
		var capture sinktest.Capture
		capture.RecordResult("sink", sinks.Result{Class: notifytype.ClassServer, Status: 500, Err: errors.New("server answered 500")})
		sinktest.RequireNoLeak(tb, sinktest.NewCanaries(), &capture)
	}))
}
