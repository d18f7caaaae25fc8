package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/engine"
)

func TestBudgetDefaultBurstThenOneEveryTwoMinutes(t *testing.T) {
	t.Parallel()
	b := engine.BudgetForTest{PerHour: 30, Burst: 10}
	now := time.Now().UTC().Truncate(time.Second)
	var tat time.Time
	require.Equal(t, 10.0, b.Tokens(tat, now))
	for i := range 10 {
		ok, next, _ := b.Reserve(tat, now)
		require.True(t, ok, "send %d of the burst", i+1)
		tat = next
	}
	ok, _, retry := b.Reserve(tat, now)
	require.False(t, ok)
	require.Equal(t, now.Add(2*time.Minute), retry, "30 an hour: a token every two minutes")
	require.Zero(t, b.Tokens(tat, now))
	ok, _, _ = b.Reserve(tat, retry)
	require.True(t, ok)
}

// TestBudgetNeverExceedsTheBucket: for any arrival times, the sends the
// budget allows never exceed Burst + PerHour·d in any window of length d.
func TestBudgetNeverExceedsTheBucket(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		b := engine.BudgetForTest{PerHour: rapid.IntRange(1, 120).Draw(t, "perHour"), Burst: rapid.IntRange(1, 30).Draw(t, "burst")}
		now := time.Now().UTC().Truncate(time.Second)
		var tat time.Time
		var sent []time.Time
		for _, gap := range rapid.SliceOfN(rapid.Int64Range(0, int64(10*time.Minute)), 1, 200).Draw(t, "gaps") {
			now = now.Add(time.Duration(gap))
			if ok, next, _ := b.Reserve(tat, now); ok {
				tat = next
				sent = append(sent, now)
			}
		}
		for i := range sent {
			for j := i; j < len(sent); j++ {
				d := sent[j].Sub(sent[i])
				allowed := float64(b.Burst) + float64(b.PerHour)*d.Hours()
				require.LessOrEqual(t, float64(j-i+1), allowed+1e-9, "window %v..%v", sent[i], sent[j])
			}
		}
	})
}
