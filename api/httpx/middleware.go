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
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[int64]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter allows each human perSecond requests a second with a burst.
func NewLimiter(perSecond float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, buckets: map[int64]*bucket{}}
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
	b, ok := l.buckets[humanID]
	if !ok {
		if len(l.buckets) > 10_000 {
			l.sweep(now)
		}
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[humanID] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

// sweep forgets humans idle for long enough that their bucket is full.
func (l *Limiter) sweep(now time.Time) {
	full := time.Duration(float64(l.burst)/float64(l.rate)*float64(time.Second)) + time.Minute
	for id, b := range l.buckets {
		if now.Sub(b.seen) > full {
			delete(l.buckets, id)
		}
	}
}
