package sinks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchboard/notify/notifytype"
)

// Adapter delivers one message to one sink, making exactly one attempt.
// Implementations are safe for concurrent use and never log.
type Adapter interface {
	Deliver(ctx context.Context, msg Message) Result
}

// Result is the outcome of one delivery attempt.
type Result struct {
	// Class is the error class of a failed attempt; ClassNone ("") means
	// delivered.
	Class notifytype.ErrorClass
	// Status is the HTTP status the server answered, 0 when it answered
	// none.
	Status int
	// RetryAfter is how long the server asked us to wait (429 and 503 with
	// Retry-After), 0 when it did not ask.
	RetryAfter time.Duration
	// Err says what went wrong, nil when delivered. It is already redacted:
	// it never contains a token, an Apprise URL, an authorization value, a
	// request or response body, or the request URL.
	Err error
}

// OK reports whether the attempt delivered the message.
func (r Result) OK() bool { return r.Class == notifytype.ClassNone }

// MaxDrain is the most of a response body an adapter reads (and discards)
// so the connection can be reused.
const MaxDrain = 64 << 10

// Drain reads and discards at most MaxDrain bytes of body and closes it.
func Drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, MaxDrain))
	_ = body.Close()
}

// StatusResult is the result of an attempt the server answered with resp,
// classified as class (ClassNone for delivered). kind names the adapter in
// the error ("gotify"). The error carries the status, never the body.
func StatusResult(kind string, resp *http.Response, class notifytype.ErrorClass, now time.Time) Result {
	r := Result{Class: class, Status: resp.StatusCode}
	if class == notifytype.ClassNone {
		return r
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		r.RetryAfter, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	r.Err = fmt.Errorf("error delivering to %s: server answered %d %s (%s)", kind, resp.StatusCode, http.StatusText(resp.StatusCode), class)
	return r
}

// ErrorResult is the result of an attempt that got no response: err is
// classified (ClassifyError) and redacted (RedactError) here. kind names
// the adapter in the error.
func ErrorResult(kind string, err error) Result {
	class := ClassifyError(err)
	return Result{Class: class, Err: fmt.Errorf("error delivering to %s (%s): %w", kind, class, RedactError(err))}
}
