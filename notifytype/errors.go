package notifytype

import (
	"errors"
	"fmt"
	"time"
)

// Code is one of the spec's stable error codes (REQ-15).
type Code string

const (
	CodeInvalidArgument    Code = "invalid_argument"
	CodeForbiddenScheme    Code = "forbidden_scheme"
	CodeEncryptionRequired Code = "encryption_required"
	CodeForbidden          Code = "forbidden"
	CodeNotFound           Code = "not_found"
	// CodeRateLimited is ours, not the spec's: a management limit (send
	// test 6 a minute per sink, notify_owner 5 an hour per endpoint) is
	// spent. Surfaces answer it 429.
	CodeRateLimited Code = "rate_limited"
)

// The sentinels, one per code. Test with errors.Is; an *Error of the same
// code matches its sentinel.
var (
	ErrInvalidArgument    = &Error{Code: CodeInvalidArgument}
	ErrForbiddenScheme    = &Error{Code: CodeForbiddenScheme}
	ErrEncryptionRequired = &Error{Code: CodeEncryptionRequired}
	ErrForbidden          = &Error{Code: CodeForbidden}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrRateLimited        = &Error{Code: CodeRateLimited}
)

// Error is a refusal a caller can act on. Field names the input field at
// fault (invalid_argument); Scheme names the refused Apprise scheme
// (forbidden_scheme). Message is written for the caller and never carries a
// secret, a URL given as a secret, or a value of another owner scope.
type Error struct {
	Code    Code   `json:"code"`
	Field   string `json:"field,omitempty"`
	Scheme  string `json:"scheme,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfterSeconds, on a rate_limited refusal, is when the limit
	// allows the next call, in whole seconds from now (at least 1); 0 when
	// unknown.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}

func (e *Error) Error() string {
	s := string(e.Code)
	switch {
	case e.Field != "":
		s += ": " + e.Field
	case e.Scheme != "":
		s += ": scheme " + e.Scheme
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is makes every *Error match the sentinel of its code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Field == "" && t.Scheme == "" && t.Message == "" && t.Code == e.Code
}

// InvalidArgument refuses the named field.
func InvalidArgument(field, msg string) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: msg}
}

// InvalidArgumentf refuses the named field with a formatted message.
func InvalidArgumentf(field, format string, args ...any) *Error {
	return InvalidArgument(field, fmt.Sprintf(format, args...))
}

// ForbiddenScheme refuses an Apprise URL by its scheme alone; the URL itself
// is never part of the error.
func ForbiddenScheme(scheme string) *Error {
	return &Error{Code: CodeForbiddenScheme, Scheme: scheme, Message: "this Apprise scheme is not allowed on this instance"}
}

// EncryptionRequired refuses to store a secret without an operator key.
func EncryptionRequired() *Error {
	return &Error{Code: CodeEncryptionRequired, Message: "SWITCHBOARD_SECRET_KEY is not set, so no secret can be stored"}
}

// Forbidden refuses an action the caller may not take.
func Forbidden(msg string) *Error { return &Error{Code: CodeForbidden, Message: msg} }

// NotFound answers for a resource that does not exist in the caller's
// scopes (or exists only in another's: D3).
func NotFound(what string) *Error { return &Error{Code: CodeNotFound, Message: what + " not found"} }

// RateLimited refuses an action whose limit is spent for now.
func RateLimited(msg string) *Error { return &Error{Code: CodeRateLimited, Message: msg} }

// RateLimitedFor refuses an action whose limit allows the next one once
// wait has passed: the message says when, in the first whole second after
// wait (so at least 1), and RetryAfterSeconds carries it.
func RateLimitedFor(msg string, wait time.Duration) *Error {
	secs := int(max(wait, 0)/time.Second) + 1
	return &Error{Code: CodeRateLimited, Message: fmt.Sprintf("%s; try again in %d s", msg, secs), RetryAfterSeconds: secs}
}

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
