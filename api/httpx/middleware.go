package httpx

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxBody is the management bodies' limit (the spec's 16 KiB).
const MaxBody = 16 << 10

// ContentSecurityPolicy is the pages' policy: our own scripts, styles and
// forms only, never framed.
const ContentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Headers sets the operator routes' standard headers on every response.
func Headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// LimitBody bounds every request body at MaxBody.
func LimitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		}
		next.ServeHTTP(w, r)
	})
}

// Limiter is the per-human request limiter every management route shares
// (the spec's Rate Limiting): a token bucket per human, in this instance.
type Limiter struct {
	mu      sync.Mutex
	buckets buckets[int64]
}

// buckets is a token bucket (golang.org/x/time/rate) per key, each made
// full on first use; keys whose bucket has refilled are forgotten once
// more than bucketsSweepAt are kept, and past bucketsMax keys (a flood of
// keys that all have failures: random tokens, IPv6 prefixes) a quarter of
// them is forgotten, whichever the map's order gives: memory is bounded,
// and a client needs bucketsMax fresh keys to reset one of its own. The
// caller holds its own lock.
type buckets[K comparable] struct {
	rate  rate.Limit
	burst int
	m     map[K]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// bucketsSweepAt is how many keys a bucket set keeps before it forgets the
// full ones.
const bucketsSweepAt = 10_000

// bucketsMax bounds the keys of a bucket set (a few MB).
const bucketsMax = 50_000

func newBuckets[K comparable](r rate.Limit, burst int) buckets[K] {
	return buckets[K]{rate: r, burst: burst, m: map[K]*bucket{}}
}

// get returns key's bucket, seen at now.
func (bs *buckets[K]) get(key K, now time.Time) *rate.Limiter {
	b, ok := bs.m[key]
	if !ok {
		if len(bs.m) > bucketsSweepAt {
			bs.sweep(now)
		}
		if len(bs.m) >= bucketsMax {
			drop := len(bs.m) - bucketsMax*3/4
			for k := range bs.m {
				if drop <= 0 {
					break
				}
				delete(bs.m, k)
				drop--
			}
		}
		b = &bucket{lim: rate.NewLimiter(bs.rate, bs.burst)}
		bs.m[key] = b
	}
	b.seen = now
	return b.lim
}

// peek returns key's bucket, nil when it has none (a full one).
func (bs *buckets[K]) peek(key K) *rate.Limiter {
	if b, ok := bs.m[key]; ok {
		return b.lim
	}
	return nil
}

// sweep forgets keys idle for long enough that their bucket is full.
func (bs *buckets[K]) sweep(now time.Time) {
	full := time.Duration(float64(bs.burst)/float64(bs.rate)*float64(time.Second)) + time.Minute
	for k, b := range bs.m {
		if now.Sub(b.seen) > full {
			delete(bs.m, k)
		}
	}
}

// NewLimiter allows each human perSecond requests a second with a burst.
func NewLimiter(perSecond float64, burst int) *Limiter {
	return &Limiter{buckets: newBuckets[int64](rate.Limit(perSecond), burst)}
}

// Allow spends one of human's tokens.
func (l *Limiter) Allow(humanID int64) bool {
	_, ok := l.Take(humanID)
	return ok
}

// Take spends one of human's tokens, or, when none is left, spends none
// and reports how long until one is.
func (l *Limiter) Take(humanID int64) (time.Duration, bool) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.buckets.get(humanID, now).ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}
