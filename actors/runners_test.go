package actors

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goroutineID is the running goroutine's id, from its stack's first line
// ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// A step runs on a runner that serves the next step once it is done, so
// that the stack a delivery grew serves again (a new goroutine a step
// copied its stack as it grew, 6 % of a drain's CPU); a panic in a step
// still reaches the actor, and stopping ends the idle runners (goleak, in
// TestMain, checks that nothing is left).
func TestStepsReuseARunnerAndStopEndsIt(t *testing.T) {
	var rs runners
	rs.open()
	ids := map[string]bool{}
	for range 5 {
		rs.step(func() Outcome {
			ids[goroutineID()] = true
			return Outcome{}
		})
	}
	require.Len(t, ids, 1, "five steps one after another run on one runner")
	require.NotContains(t, ids, goroutineID(), "a step does not run on the actor's goroutine")

	require.PanicsWithValue(t, "boom", func() { rs.step(func() Outcome { panic("boom") }) })
	rs.step(func() Outcome { ids[goroutineID()] = true; return Outcome{} })
	require.Len(t, ids, 1, "a runner whose step panicked serves on")

	rs.close()
	rs.step(func() Outcome { return Outcome{} }) // after close: a goroutine of its own, which ends
	rs.mu.Lock()
	defer rs.mu.Unlock()
	require.Empty(t, rs.idle, "no runner waits once the supervisor stopped")
}
