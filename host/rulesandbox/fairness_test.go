package rulesandbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owner's requests are served in the order they came: a dry run's
// compile is not overtaken by evaluations the owner asked for after it
// (faults row 6d: one waited 1.2 s behind them, then ran its budget).
func TestAnOwnersRequestsAreServedInTheOrderTheyCame(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Workers: 4, PerOwner: 1, Reserve: -1})
	release := make(chan struct{})
	var calls atomic.Int32
	p.onReady = func(int) {
		if calls.Add(1) == 1 {
			<-release
		}
	}
	in := []byte(`{"a":1}`)
	order := make(chan int, 6)
	eval := func(i int) {
		got := p.Eval(context.Background(), "human:1", []string{`.a`}, in, time.Minute)
		if got[0].Text != "1" {
			t.Errorf("request %d: %+v", i, got[0])
		}
		order <- i
	}
	go eval(0)
	queued := func(n int) func() bool {
		return func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.owners["human:1"] == 1 && len(p.queue["human:1"]) == n
		}
	}
	require.Eventually(t, queued(0), time.Minute, time.Millisecond, "the first request holds the owner's worker")
	for i := 1; i <= 5; i++ {
		go eval(i)
		require.Eventually(t, queued(i), time.Minute, time.Millisecond, "request %d waits", i)
	}
	close(release)
	for want := range 6 {
		require.Equal(t, want, <-order)
	}
}

// The reserve: an owner that already holds a worker does not take the
// last ready idle ones (a worker is started for it instead), so that
// another owner finds one ready; an owner that holds none takes one, and
// the reserve is filled again behind it.
func TestAnOwnerRunningSomethingLeavesTheReserveToOthers(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Workers: 8, PerOwner: 2})
	require.Equal(t, 2, p.Limits().Reserve)
	in := []byte(`{"a":1}`)
	ctx := context.Background()
	// The first request starts a worker and fills the reserve behind it.
	require.Equal(t, "1", p.Eval(ctx, "human:1", []string{`.a`}, in, time.Minute)[0].Text)
	idle := func(n int) func() bool {
		return func() bool { return p.Stats().Idle == n }
	}
	require.Eventually(t, idle(3), time.Minute, time.Millisecond, "%+v", p.Stats())
	require.Equal(t, int64(3), p.Stats().Spawned)

	// human:2 holds two workers at once, without giving them back.
	var armed atomic.Bool
	var last atomic.Int64
	held, release := make(chan int, 2), make(chan struct{})
	p.onReady = func(pid int) {
		last.Store(int64(pid))
		if armed.Load() {
			held <- pid
			<-release
		}
	}
	armed.Store(true)
	done := make(chan []Result, 2)
	for range 2 {
		go func() { done <- p.Eval(ctx, "human:2", []string{`.a`}, in, time.Minute) }()
	}
	<-held
	<-held
	armed.Store(false)
	st := p.Stats()
	require.Equal(t, 2, st.Idle, "human:2 took one of the reserve, and a worker started for it: %+v", st)
	require.Equal(t, int64(4), st.Spawned, "%+v", st)
	reserve := map[int64]bool{}
	p.mu.Lock()
	for _, w := range p.idle {
		require.NotEqual(t, "human:2", w.owner)
		reserve[int64(w.cmd.Process.Pid)] = true
	}
	p.mu.Unlock()

	// Another owner is answered by the reserve while human:2 holds its
	// share, and the reserve is filled again.
	require.Equal(t, "1", p.Eval(ctx, "human:3", []string{`.a`}, in, time.Minute)[0].Text)
	require.True(t, reserve[last.Load()], "human:3 was answered by a worker of the reserve")
	close(release)
	for range 2 {
		require.Equal(t, "1", (<-done)[0].Text)
	}
	require.Eventually(t, func() bool { return p.Stats().Spawned == 5 }, time.Minute, time.Millisecond, "%+v", p.Stats())
}
