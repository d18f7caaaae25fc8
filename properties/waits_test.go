package properties

import (
	"sync"
	"testing"
	"time"
)

// A check waits for what it expects (an attempt, the engines to settle, a
// heartbeat) as long as it takes: the machine may be a busy 2-core box,
// and a bound of a few seconds failed checks there that were only slow
// (issue 23, item 9). What bounds the wait is go test's own -timeout: a
// wait gives up waitMargin before it, so that a condition that never comes
// fails the check with its reason, and the cleanups (engines stopped,
// pools closed) run, before go test panics on its timeout. Waits that
// begin later get less, and none any once the margin is reached, so
// rapid's shrinking of such a failure ends quickly too.
const waitMargin = 90 * time.Second

var (
	deadlineMu   sync.Mutex
	testDeadline time.Time // zero: go test has no -timeout
)

// noteDeadline records go test's deadline (newWorld calls it).
func noteDeadline(t *testing.T) {
	if d, ok := t.Deadline(); ok {
		deadlineMu.Lock()
		testDeadline = d
		deadlineMu.Unlock()
	}
}

// waitLimit is how long a wait that begins now may last.
func waitLimit() time.Duration {
	deadlineMu.Lock()
	d := testDeadline
	deadlineMu.Unlock()
	if d.IsZero() {
		return time.Hour
	}
	return max(0, time.Until(d)-waitMargin)
}

// waitEnd says, in a failure, where a wait's limit comes from.
const waitEnd = "waits end 90 s before go test's -timeout; a slow machine needs a longer -timeout, not a shorter wait"
