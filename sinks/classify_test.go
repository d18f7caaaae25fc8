package sinks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"code.dny.dev/ssrf"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

func TestClassifyStatus(t *testing.T) {
	t.Parallel()

	for code, want := range map[int]notifytype.ErrorClass{
		200: notifytype.ClassNone, 201: notifytype.ClassNone, 204: notifytype.ClassNone, 299: notifytype.ClassNone,
		300: notifytype.ClassRedirect, 301: notifytype.ClassRedirect, 308: notifytype.ClassRedirect,
		400: notifytype.ClassRejected, 401: notifytype.ClassAuth, 403: notifytype.ClassAuth,
		404: notifytype.ClassRejected, 424: notifytype.ClassRejected, 429: notifytype.ClassRejected, 499: notifytype.ClassRejected,
		500: notifytype.ClassServer, 503: notifytype.ClassServer, 599: notifytype.ClassServer,
		100: notifytype.ClassServer, 600: notifytype.ClassServer, 0: notifytype.ClassServer,
	} {
		require.Equal(t, want, sinks.ClassifyStatus(code), code)
	}
}

func TestClassifyError(t *testing.T) {
	t.Parallel()

	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://x.example/message", Err: err} }
	for _, tc := range []struct {
		err  error
		want notifytype.ErrorClass
	}{
		{nil, notifytype.ClassNone},
		{errors.New("something"), notifytype.ClassNetwork},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}), notifytype.ClassNetwork},
		{wrap(&net.DNSError{Err: "no such host", Name: "x.example", IsNotFound: true}), notifytype.ClassNetwork},
		{wrap(context.DeadlineExceeded), notifytype.ClassTimeout},
		{wrap(os.ErrDeadlineExceeded), notifytype.ClassTimeout},
		{wrap(timeoutErr{}), notifytype.ClassTimeout},
		{wrap(&net.DNSError{Err: "timeout", Name: "x.example", IsTimeout: true}), notifytype.ClassTimeout},
		{wrap(x509.UnknownAuthorityError{}), notifytype.ClassTLS},
		{wrap(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x.example"}), notifytype.ClassTLS},
		{wrap(x509.CertificateInvalidError{Reason: x509.Expired}), notifytype.ClassTLS},
		{wrap(&tls.CertificateVerificationError{Err: errors.New("bad")}), notifytype.ClassTLS},
		{wrap(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), notifytype.ClassTLS},
		{wrap(tls.AlertError(42)), notifytype.ClassTLS},
		{wrap(errors.New("remote error: tls: handshake failure")), notifytype.ClassTLS},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%w: 10.0.0.1 is not a permitted destination", ssrf.ErrProhibitedIP)}), notifytype.ClassBlocked},
		{wrap(ssrf.ErrProhibitedPort), notifytype.ClassBlocked},
		{wrap(ssrf.ErrProhibitedNetwork), notifytype.ClassBlocked},
		{wrap(sinks.ErrInsecureScheme), notifytype.ClassBlocked},
		{sinks.ErrInvalidURL, notifytype.ClassBlocked},
		{fmt.Errorf("stopped: %w", sinks.ErrRedirect), notifytype.ClassRedirect},
	} {
		require.Equal(t, tc.want, sinks.ClassifyError(tc.err), "%v", tc.err)
		// Redaction keeps the class.
		require.Equal(t, tc.want, sinks.ClassifyError(sinks.RedactError(tc.err)), "redacted %v", tc.err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0":                              0,
		"120":                            120 * time.Second,
		" 7 ":                            7 * time.Second,
		"86400":                          24 * time.Hour,
		"86401":                          sinks.MaxRetryAfter,
		"99999999999999999999999":        sinks.MaxRetryAfter,
		"Mon, 30 Nov 2026 12:05:00 GMT":  5 * time.Minute,
		"Monday, 30-Nov-26 12:00:30 GMT": 30 * time.Second,
		"Mon Nov 30 12:01:00 2026":       time.Minute,
		"Sun, 29 Nov 2026 12:00:00 GMT":  0,
		"Sat, 30 Nov 2030 12:00:00 GMT":  sinks.MaxRetryAfter,
	} {
		d, ok := sinks.ParseRetryAfter(in, now)
		require.True(t, ok, in)
		require.Equal(t, want, d, in)
	}
	for _, bad := range []string{"", "  ", "-5", "1.5", "soon", "120s"} {
		d, ok := sinks.ParseRetryAfter(bad, now)
		require.False(t, ok, bad)
		require.Zero(t, d, bad)
	}
}
