package httpx

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/notifytype"
)

// Defaults of the failed-authentication limit (issue 18 item 10).
const (
	// AuthFailuresPerMinuteDefault is how fast a client address earns back
	// failed attempts.
	AuthFailuresPerMinuteDefault = 10
	// AuthFailuresBurstDefault is how many failures in a row a client
	// address may have before it is refused.
	AuthFailuresBurstDefault = 20
)

// AuthFailures limits failed authentication per client address: a token
// bucket (golang.org/x/time/rate) per remote IP, spent by each failure: a
// /hooks delivery refused as unknown, badly signed or stale, a missing or
// wrong bearer token on the operator API, MCP or the ops routes, a login
// link that is unknown, used or expired. While a client's bucket is empty,
// every such route answers it 429 rate_limited with Retry-After before
// looking at its credential, changing nothing, so guessing secrets from one
// address is slow. A client that authenticates spends nothing; a good
// credential sent while the bucket is empty waits like a bad one (else the
// limit would tell which guesses are good).
//
// The address is the connection's (RemoteAddr), never a forwarded header a
// client could write; behind a reverse proxy every client shares the
// proxy's bucket (size the limit for it). The limit is per instance.
// A nil *AuthFailures limits nothing.
type AuthFailures struct {
	clock engine.Clock

	mu      sync.Mutex
	buckets buckets[string]
}

// NewAuthFailures allows each client address burst failures, earned back
// at perMinute a minute, on clock (nil: the system clock).
func NewAuthFailures(perMinute float64, burst int, clock engine.Clock) *AuthFailures {
	if perMinute <= 0 || burst <= 0 {
		panic("httpx: NewAuthFailures needs a positive rate and burst")
	}
	if clock == nil {
		clock = engine.SystemClock{}
	}
	return &AuthFailures{clock: clock, buckets: newBuckets[string](rate.Limit(perMinute/60), burst)}
}

// ClientAddr is the request's client address: the IP of its connection.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Check returns a *TooManyFailures when r's client has no failure left,
// nil when it may try to authenticate.
func (a *AuthFailures) Check(r *http.Request) error {
	if a == nil {
		return nil
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	lim := a.buckets.peek(ClientAddr(r))
	if lim == nil {
		return nil
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return nil
	}
	wait := time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
	return &TooManyFailures{RetryAfter: wait}
}

// Fail spends one of r's client's failures.
func (a *AuthFailures) Fail(r *http.Request) {
	if a == nil {
		return
	}
	now := a.clock.Now()
	addr := ClientAddr(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buckets.get(addr, now).AllowN(now, 1)
}

// TooManyFailures is the refusal of a client out of failed
// authentications: rate_limited (429), with Retry-After.
type TooManyFailures struct {
	RetryAfter time.Duration
}

func (e *TooManyFailures) public() *notifytype.Error {
	return notifytype.RateLimited("too many failed authentications from this address; retry later")
}

func (e *TooManyFailures) Error() string { return e.public().Error() }
func (e *TooManyFailures) Unwrap() error { return e.public() }

// SetRetryAfter sets Retry-After (whole seconds, at least 1) when err is a
// *TooManyFailures.
func SetRetryAfter(w http.ResponseWriter, err error) {
	var tmf *TooManyFailures
	if errors.As(err, &tmf) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(tmf.RetryAfter.Seconds())))))
	}
}
