package httpx

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboard/notify/engine/clocks"
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

// AuthFailures limits failed authentication (issue 18 item 10, issue 24
// item 6): token buckets (golang.org/x/time/rate), one per client address
// (ClientAddr: the real client behind a trusted proxy, an IPv6 /64) and
// one per credential presented (a bearer token, a login link, a webhook
// id), each spent by every failure: a /hooks delivery refused as unknown,
// badly signed or stale, a wrong bearer token on the operator API, MCP or
// the ops routes, a login link that is unknown, used or expired. A failure
// while either bucket is empty is answered 429 rate_limited with
// Retry-After instead of 401/403/404, changing nothing.
//
// A valid credential is never refused by these buckets: it is looked at
// first, and a request that authenticates spends nothing and is served,
// whatever failures its address (a proxy, a NAT, an attacker sharing it)
// or anyone guessing at the same webhook made. The limit makes a guessing
// flood visible and slow to answer honestly, and keeps a client with a
// stale credential off the service; it does not hide which guesses are
// good (a credential is 256 random bits: guessing one is not the threat).
// Both bucket sets are bounded in keys (bucketsMax). The limit is per
// instance. A nil *AuthFailures limits nothing.
type AuthFailures struct {
	clock clocks.Clock

	mu     sync.Mutex
	byAddr buckets[string]
	byCred buckets[string]
}

// NewAuthFailures allows each client address and each credential burst
// failures, earned back at perMinute a minute, on clock (nil: the system
// clock).
func NewAuthFailures(perMinute float64, burst int, clock clocks.Clock) *AuthFailures {
	if perMinute <= 0 || burst <= 0 {
		panic("httpx: NewAuthFailures needs a positive rate and burst")
	}
	if clock == nil {
		clock = clocks.System{}
	}
	return &AuthFailures{clock: clock,
		byAddr: newBuckets[string](rate.Limit(perMinute/60), burst),
		byCred: newBuckets[string](rate.Limit(perMinute/60), burst)}
}

// CredentialKey is the key of a presented secret's own bucket: a digest of
// it under a kind ("token", "link"), never the secret.
func CredentialKey(kind, secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return kind + ":" + hex.EncodeToString(sum[:12])
}

// Spent returns a *TooManyFailures when the credential cred has no failure
// left: that exact secret failed burst times (a token or link never turns
// valid later), so it is refused before it is looked up. Only for keys of
// CredentialKey: a key naming something that can be presented validly
// later (a webhook id) must go through Fail instead.
func (a *AuthFailures) Spent(cred string) error {
	if a == nil || cred == "" {
		return nil
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return refusal(a.byCred.peek(cred), now)
}

// Fail spends one failure of r's client address and one of the
// credential cred ("" for none), and returns a *TooManyFailures when
// either had none left: the failure is then answered 429.
func (a *AuthFailures) Fail(r *http.Request, cred string) error {
	if a == nil {
		return nil
	}
	now := a.clock.Now()
	addr := ClientAddr(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	var err error
	if lim := a.byAddr.get(addr, now); !lim.AllowN(now, 1) {
		err = refusal(lim, now)
	}
	if cred != "" {
		if lim := a.byCred.get(cred, now); !lim.AllowN(now, 1) && err == nil {
			err = refusal(lim, now)
		}
	}
	return err
}

// refusal is the *TooManyFailures of an empty bucket, nil for a bucket
// with a failure left (or none yet).
func refusal(lim *rate.Limiter, now time.Time) error {
	if lim == nil {
		return nil
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return nil
	}
	wait := time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
	return &TooManyFailures{RetryAfter: max(wait, time.Second)}
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
