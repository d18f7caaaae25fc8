package sinks

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps the wait a server can ask for with Retry-After.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value: delay seconds or an
// HTTP date, relative to now. A date in the past gives 0. The wait is
// capped at MaxRetryAfter. ok is false when v is empty or neither form.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true // all digits, too many of them
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
