package engine

import "time"

// tokenBucket is a sink's token bucket (D8): PerHour messages an hour with a
// burst of Burst. It is kept as GCRA state, a theoretical arrival time
// (TAT) that each counted delivery record stores after it, so the bucket
// is computed from delivery records and holds across instances: the
// reservation reads the latest TAT and writes the next one under the sink's
// row lock.
//
// A send at now conforms when max(TAT, now) − now ≤ (Burst−1)·T, with
// T = 1h / PerHour; it moves the TAT to max(TAT, now) + T. A sequence of
// conforming sends never has more than Burst + PerHour·d/1h sends in any
// interval of length d.
type tokenBucket struct {
	PerHour int
	Burst   int
}

func (b tokenBucket) interval() time.Duration { return time.Hour / time.Duration(max(b.PerHour, 1)) }

// Reserve spends one token at now. ok reports whether one was there; tat is
// the state to record after the send; when there was none, next is when
// the next token returns.
func (b tokenBucket) Reserve(tat, now time.Time) (ok bool, newTAT, next time.Time) {
	t := b.interval()
	start := tat
	if start.Before(now) {
		start = now
	}
	tolerance := time.Duration(max(b.Burst, 1)-1) * t
	if start.Sub(now) > tolerance {
		return false, tat, start.Add(-tolerance)
	}
	return true, start.Add(t), time.Time{}
}

// Tokens is how many whole and partial tokens the bucket holds at now.
func (b tokenBucket) Tokens(tat, now time.Time) float64 {
	t := b.interval()
	start := tat
	if start.Before(now) {
		start = now
	}
	tokens := float64(now.Add(time.Duration(b.Burst)*t).Sub(start)) / float64(t)
	return min(max(tokens, 0), float64(b.Burst))
}
