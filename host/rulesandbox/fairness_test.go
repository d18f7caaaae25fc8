//go:build !race

package rulesandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owner's requests are served in the order they came: a dry run's
// compile is not overtaken by evaluations the owner asked for after it
// (faults row 6d: one waited 1.2 s behind them, then ran its budget).
func TestAnOwnersRequestsAreServedInTheOrderTheyCame(t *testing.T) {
	t.Parallel()
	// One worker at a time for the owner: its requests run one after
	// another, and each reads the worker's clock (now, outside the
	// checked subset), which says in what order they ran.
	p := newPool(t, Config{Workers: 4, PerOwner: 1, Reserve: -1, Unchecked: true})
	release := make(chan struct{})
	var calls atomic.Int32
	p.onReady = func(int) {
		if calls.Add(1) == 1 {
			<-release
		}
	}
	ran := make([]float64, 6)
	var wg sync.WaitGroup
	eval := func(i int) {
		defer wg.Done()
		got := p.Eval(context.Background(), "human:1", []string{`now`}, []byte(`{}`), time.Minute)
		at, err := strconv.ParseFloat(got[0].Text, 64)
		if err != nil {
			t.Errorf("request %d: %+v", i, got[0])
		}
		ran[i] = at
	}
	queued := func(n int) func() bool {
		return func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.owners["human:1"] == 1 && len(p.queue["human:1"]) == n
		}
	}
	wg.Add(6)
	go eval(0)
	require.Eventually(t, queued(0), time.Minute, time.Millisecond, "the first request holds the owner's worker")
	for i := 1; i <= 5; i++ {
		go eval(i)
		require.Eventually(t, queued(i), time.Minute, time.Millisecond, "request %d waits", i)
	}
	close(release)
	wg.Wait()
	for i := 1; i < 6; i++ {
		require.Less(t, ran[i-1], ran[i], "request %d ran before request %d: %v", i, i-1, ran)
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

// An owner that holds no worker for a moment, between two of its queued
// requests, is still busy: it does not take the reserve. The owner whose
// hostile rules get its workers killed one after another held none each
// time one was killed, took the reserve, and another owner's delivery found
// none ready and waited for a worker to start (60-160 ms in faults row 6d).
func TestAnOwnerWithRequestsWaitingLeavesTheReserveToOthers(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Workers: 8, PerOwner: 1, Unchecked: true})
	require.Equal(t, 2, p.Limits().Reserve)
	in := []byte(`{"a":1}`)
	ctx := context.Background()
	threeIdle(t, p)
	unused := map[int]bool{} // the reserve: idle, used by nobody
	p.mu.Lock()
	for _, w := range p.idle {
		if w.owner == "" {
			unused[w.cmd.Process.Pid] = true
		}
	}
	p.mu.Unlock()
	require.Len(t, unused, 2)

	// human:2's first request runs without end until its worker is
	// killed, once two more wait behind it.
	first, queued := make(chan int, 1), make(chan struct{})
	pids := make(chan int, 3)
	var calls atomic.Int32
	p.onReady = func(pid int) {
		pids <- pid
		if calls.Add(1) == 1 {
			first <- pid
			<-queued
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	var wg sync.WaitGroup
	results := make([][]Result, 3)
	wg.Go(func() { results[0] = p.Eval(ctx, "human:2", []string{`last(range(1e15))`}, in, time.Minute) })
	<-first
	for i := 1; i < 3; i++ {
		wg.Go(func() { results[i] = p.Eval(ctx, "human:2", []string{`.a`}, in, 50*time.Millisecond) })
	}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.queue["human:2"]) == 2 // the first has its worker
	}, time.Minute, time.Millisecond, "human:2's other requests queue")
	close(queued)
	wg.Wait()
	require.Equal(t, Stopped, results[0][0].Kind, "%+v", results[0][0])
	for i := 1; i < 3; i++ {
		require.Equal(t, "1", results[i][0].Text, "%+v", results[i][0])
	}
	close(pids)
	var got []int
	for pid := range pids {
		got = append(got, pid)
	}
	require.Len(t, got, 3)
	// Its first request took one of the three idle (more than the
	// reserve); the second came while it held none, with the third
	// waiting: it started a worker of its own and left the reserve.
	require.False(t, unused[got[1]], "human:2's second request took the reserve: %v of %v", got, unused)
	p.mu.Lock()
	left := 0
	for _, w := range p.idle {
		if unused[w.cmd.Process.Pid] {
			left++
		}
	}
	p.mu.Unlock()
	require.Equal(t, 1, left, "the reserve worker human:2 did not take is still idle")
}

// The reserve is refilled by workers started for any owner: one starting
// for a busy owner's request is that owner's, and counting it in the
// reserve left the reserve short while it started, so that another owner
// found no worker ready (faults row 6d: a delivery waited 60-160 ms for a
// worker to start). Workers start here behind a gate, so that one stays
// starting while the reserve is taken.
func TestAWorkerStartingForABusyOwnerIsNotCountedInTheReserve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	self, err := os.Executable()
	require.NoError(t, err)
	exe := filepath.Join(dir, "worker")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\nwhile [ ! -e '"+gate+"' ]; do sleep 0.01; done\nexec '"+self+"' \"$@\"\n"), 0o700))
	p := newPool(t, Config{Workers: 8, PerOwner: 2, Exe: exe})
	require.Equal(t, 2, p.Limits().Reserve)
	in := []byte(`{"a":1}`)
	ctx := context.Background()
	threeIdle(t, p)
	require.Equal(t, int64(3), p.Stats().Spawned)
	require.NoError(t, os.Remove(gate))

	// human:2 holds a worker (one of the three) and asks for a second:
	// one is started for it, and waits at the gate.
	held, release := make(chan struct{}, 1), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	p.onReady = func(int) {
		if armed.CompareAndSwap(true, false) {
			held <- struct{}{}
			<-release
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	defer func() { _ = os.WriteFile(gate, nil, 0o600) }() // first, even when the test fails
	wg.Go(func() { p.Eval(ctx, "human:2", []string{`.a`}, in, time.Minute) })
	<-held
	wg.Go(func() { p.Eval(ctx, "human:2", []string{`.a`}, in, time.Minute) })
	require.Eventually(t, func() bool { return p.Stats().Spawned == 4 }, time.Minute, time.Millisecond,
		"a worker is started for human:2's second request: %+v", p.Stats())

	// human:3 takes one of the reserve's two; the reserve is refilled,
	// though human:2's worker is still starting.
	require.Equal(t, "1", p.Eval(ctx, "human:3", []string{`.a`}, in, time.Minute)[0].Text)
	p.mu.Lock()
	starting := p.warming // both wait at the gate (for readyAllowance at most)
	p.mu.Unlock()
	require.Equal(t, 2, starting, "a worker is started to refill the reserve beside human:2's")
}

// A program that runs past its share of CPU has its worker demoted to the
// lowest priority, every thread of it, so that ordinary rules and the
// server win the CPU from it; the worker is not reused (the next program
// would start demoted), and the one after it runs at normal priority.
func TestAWorkerPastItsShareOfCPUIsDemotedAndNotReused(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Unchecked: true, Reserve: -1})
	p.demoteAt = demoteTick
	demoted := make(chan []int, 1)
	var group atomic.Int64 // the demoted worker's session's nice value
	p.onDemote = func(pid int) { group.Store(int64(sessionNice(t, pid))); demoted <- niceOfThreads(t, pid) }
	var ready atomic.Int64
	p.onReady = func(pid int) { ready.Store(int64(pid)) }
	in := []byte(`{"a":1}`)
	// Some hundreds of ms of CPU, well within its timeout: it answers.
	got := p.Eval(context.Background(), "human:1", []string{`reduce range(1000000) as $i (0; . + 1)`}, in, time.Minute)
	require.Equal(t, "1000000", got[0].Text, "%+v", got[0])
	nices := <-demoted
	require.NotEmpty(t, nices)
	for _, n := range nices {
		require.Equal(t, demotedNice, n, "every thread is demoted: %v", nices)
	}
	if autogroups(t) {
		require.Equal(t, int64(demotedNice), group.Load(), "the worker's session is demoted as a group")
	}
	first := ready.Load()

	p.demoteAt = 0 // the default: an ordinary rule stays at normal priority
	got = p.Eval(context.Background(), "human:1", []string{`.a`}, in, time.Minute)
	require.Equal(t, "1", got[0].Text)
	st := p.Stats()
	require.Equal(t, int64(2), st.Spawned, "the demoted worker was not reused: %+v", st)
	require.Equal(t, int64(1), st.Killed, "%+v", st)
	require.NotEqual(t, first, ready.Load())
	// The server's own priority (the test may run under nice).
	own := niceOfThreads(t, os.Getpid())[0]
	for _, n := range niceOfThreads(t, int(ready.Load())) {
		require.Equal(t, own, n, "a fresh worker runs at the server's priority")
	}
	if autogroups(t) {
		require.Zero(t, sessionNice(t, int(ready.Load())), "a fresh worker's session is not demoted")
	}
	require.Len(t, demoted, 0, "the ordinary rule was not demoted")
}

// Every worker leads a session of its own (its session id is its pid), so
// that where the kernel shares the CPU between sessions first, a demoted
// worker's session can be lowered as a whole (demote).
func TestAWorkerLeadsASessionOfItsOwn(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Unchecked: true, Reserve: -1})
	var ready atomic.Int64
	p.onReady = func(pid int) { ready.Store(int64(pid)) }
	got := p.Eval(context.Background(), "human:1", []string{`.a`}, []byte(`{"a":1}`), time.Minute)
	require.Equal(t, "1", got[0].Text, "%+v", got[0])
	pid := int(ready.Load())
	require.NotZero(t, pid)
	sid := sessionOf(t, pid)
	require.Equal(t, pid, sid, "the worker's session")
	require.NotEqual(t, sessionOf(t, os.Getpid()), sid, "not the server's session")
}

// sessionOf is process pid's session id (proc(5): the 6th field of stat).
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), ") ")
	require.True(t, ok)
	sid, err := strconv.Atoi(strings.Fields(rest)[3])
	require.NoError(t, err)
	return sid
}

// autogroups says whether the kernel shares the CPU between sessions
// first (sched_autogroup_enabled).
func autogroups(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if errors.Is(err, os.ErrNotExist) {
		return false // a kernel built without it
	}
	require.NoError(t, err)
	return strings.TrimSpace(string(b)) == "1"
}

// sessionNice is the nice value of process pid's session's group
// (/proc/<pid>/autogroup: "/autogroup-<n> nice <v>").
func sessionNice(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	require.NoError(t, err)
	_, v, ok := strings.Cut(strings.TrimSpace(string(b)), " nice ")
	require.True(t, ok, "%q", b)
	n, err := strconv.Atoi(v)
	require.NoError(t, err)
	return n
}

// niceOfThreads is the nice value of each thread of process pid.
func niceOfThreads(t *testing.T, pid int) []int {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	require.NoError(t, err)
	var nices []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		require.NoError(t, err)
		_, rest, ok := strings.Cut(string(b), ") ")
		require.True(t, ok)
		f := strings.Fields(rest)
		// Fields count from state (3rd in proc(5)); nice is the 19th.
		n, err := strconv.Atoi(f[16])
		require.NoError(t, err)
		nices = append(nices, n)
	}
	return nices
}

// The programs after the one that ran long do not run demoted: its worker
// answers it and the rest go to a fresh worker at the server's priority.
// On a busy machine they crawled at nice 19 past the rules' budget (ci4:
// TestExpressionThatLoopsForeverIsAFault's routing rule was not run).
func TestTheRulesAfterADemotedOneRunInAFreshWorker(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Unchecked: true, Reserve: -1})
	p.demoteAt = demoteTick
	var demotedPid atomic.Int64
	p.onDemote = func(pid int) { demotedPid.Store(int64(pid)) }
	var ready atomic.Int64
	p.onReady = func(pid int) { ready.Store(int64(pid)) }
	in := []byte(`{"a":1}`)
	got := p.Eval(context.Background(), "human:1", []string{`reduce range(1000000) as $i (0; . + 1)`, `.a`}, in, time.Minute)
	require.Equal(t, "1000000", got[0].Text, "%+v", got[0])
	require.Equal(t, "1", got[1].Text, "%+v", got[1])
	require.NotZero(t, demotedPid.Load(), "the long program's worker was demoted")
	require.NotEqual(t, demotedPid.Load(), ready.Load(), "the rule after it ran in another worker")
	require.Equal(t, int64(2), p.Stats().Spawned)
}

// A program whose worker was demoted while it ran gets its limit and grace
// in wall time and no more: at nice 19 on a loaded machine it earns its CPU
// slowly, and the wall cap's extension (up to eight times that, for a
// worker merely waiting for a core) was paid by the rules after it. Here
// the demoted worker is stopped (SIGSTOP), as one starved of CPU would be:
// it is given up at its limit, long before the caller's budget, which the
// wall cap would have let it reach.
func TestADemotedProgramGetsNoMoreWallTimeThanItsLimit(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Grace: time.Second, Unchecked: true, Reserve: -1})
	p.demoteAt = demoteTick
	p.onDemote = func(pid int) { _ = syscall.Kill(pid, syscall.SIGSTOP) }
	// The budget outlasts the limit and grace (1.1 s) and falls within
	// the wall cap (8 × 1.1 s).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := p.Eval(ctx, "human:1", []string{`last(range(1e15))`, `.a`}, []byte(`{"a":1}`), 100*time.Millisecond)
	require.Equal(t, Stopped, got[0].Kind, "%+v", got[0])
	require.Equal(t, "stopped: ran past its time limit of 1.1s", got[0].Detail, "given up at its limit, not at the budget")
	require.Equal(t, "1", got[1].Text, "the rule after it runs within the budget: %+v", got[1])
}

// A worker killed past a deadline is reaped in the background: the caller
// has its answer without waiting for the worker to exit (a demoted worker
// on a loaded machine waits for a core to exit as long as it waited to
// run: 110-450 ms beside two CPU burners), and the worker's place in the
// pool's count is given back only once it is reaped, so the processes
// alive, dying ones included, stay within Workers.
func TestAWorkerKilledPastItsDeadlineIsReapedWithoutTheCaller(t *testing.T) {
	t.Parallel()
	p := newPool(t, Config{Grace: 50 * time.Millisecond, Unchecked: true, Reserve: -1})
	// Stopped as soon as it has its input, the worker cannot answer its
	// program's own timeout: the pool's deadline ends it. The limit (2 s)
	// is far above how long the stop may take to arrive on a busy
	// machine, so the worker's own CPU timeout cannot end it first
	// (TestAStoppedWorkerIsGivenUpAtItsWallCap).
	p.onReady = func(pid int) { _ = syscall.Kill(pid, syscall.SIGSTOP) }
	reaping, release := make(chan int, 1), make(chan struct{})
	p.onReap = func(pid int) {
		reaping <- pid
		<-release
	}
	got := p.Eval(context.Background(), "human:1", []string{`last(range(1e15))`}, []byte(`{"a":1}`), 2*time.Second)
	require.Equal(t, Stopped, got[0].Kind, "%+v", got[0])
	var pid int
	select {
	case pid = <-reaping:
	default:
		t.Fatal("the killed worker was reaped before the caller had its answer")
	}
	// Its replacement, warmed for the next owner, counts beside it.
	require.Eventually(t, func() bool { return p.Stats().Idle == 1 }, time.Minute, time.Millisecond, "a replacement is warmed")
	require.Equal(t, 2, p.Stats().Live, "the dying worker still counts, beside its replacement")
	close(release)
	require.Eventually(t, func() bool { return p.Stats().Live == 1 }, time.Minute, time.Millisecond,
		"the worker's place is given back once it is reaped")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the worker was reaped")
}

// threeIdle has human:1 run a request on p, a new pool with a reserve of
// two, and waits for its worker and the reserve behind it to be idle.
func threeIdle(t *testing.T, p *Pool) {
	t.Helper()
	require.Equal(t, "1", p.Eval(context.Background(), "human:1", []string{`.a`}, []byte(`{"a":1}`), time.Minute)[0].Text)
	require.Eventually(t, func() bool { return p.Stats().Idle == 3 }, time.Minute, time.Millisecond, "%+v", p.Stats())
}
