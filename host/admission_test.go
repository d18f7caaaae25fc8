package host

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdmissionRunsAnOwnersDryRunsPerAtOnceInTheOrderTheyCame(t *testing.T) {
	a := newAdmission(2)
	ctx := context.Background()
	first, err := a.enter(ctx, "owner")
	require.NoError(t, err)
	second, err := a.enter(ctx, "owner")
	require.NoError(t, err)

	admitted := func(wantWaiting int) (chan func(), *int) {
		t.Helper()
		ch := make(chan func(), 1)
		go func() {
			leave, err := a.enter(ctx, "owner")
			if err == nil {
				ch <- leave
			}
		}()
		waitUntil(t, func() bool { return a.waiting("owner") == wantWaiting }, "the dry run waits for admission")
		return ch, nil
	}
	third, _ := admitted(3)
	fourth, _ := admitted(4)

	// Another owner is not held by this one's queue.
	other, err := a.enter(ctx, "other")
	require.NoError(t, err)
	other()

	first()
	leaveThird := <-third // the one that came first goes first
	select {
	case <-fourth:
		t.Fatal("a third dry run of the owner was admitted while two ran")
	default:
	}
	second()
	leaveFourth := <-fourth
	leaveThird()
	leaveFourth()
	leaveFourth() // a second leave gives back nothing more
	require.Zero(t, a.waiting("owner"))
	require.Empty(t, a.owners, "an owner with nothing in flight has no entry")
}

func TestAdmissionWaiterWhoseContextEndsLeavesNoTrace(t *testing.T) {
	a := newAdmission(1)
	hold, err := a.enter(context.Background(), "owner")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.enter(ctx, "owner")
		done <- err
	}()
	waitUntil(t, func() bool { return a.waiting("owner") == 2 }, "the second dry run waits for admission")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, 1, a.waiting("owner"))
	hold()
	require.Empty(t, a.owners)
	// The slot the cancelled waiter did not take is free.
	again, err := a.enter(context.Background(), "owner")
	require.NoError(t, err)
	again()
}

// waitUntil polls cond until it holds; it gives up, saying what it waited
// for, only when the test's own deadline (go test -timeout) is near.
func waitUntil(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline, ok := t.(interface{ Deadline() (time.Time, bool) }).Deadline()
	for !cond() {
		if ok && time.Until(deadline) < 5*time.Second {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
