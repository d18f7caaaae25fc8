package sinks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"

	"code.dny.dev/ssrf"

	"github.com/switchboard/notify/notifytype"
)

// ClassifyStatus is the error class of an HTTP status (D11): 2xx none, 3xx
// redirect (never followed), 401 and 403 auth, other 4xx rejected, 5xx
// server. A status outside 200..599 is a server fault.
func ClassifyStatus(code int) notifytype.ErrorClass {
	switch {
	case code >= 200 && code <= 299:
		return notifytype.ClassNone
	case code >= 300 && code <= 399:
		return notifytype.ClassRedirect
	case code == 401 || code == 403:
		return notifytype.ClassAuth
	case code >= 400 && code <= 499:
		return notifytype.ClassRejected
	default:
		return notifytype.ClassServer
	}
}

// ClassifyError is the error class of an attempt that got no HTTP response
// (D11): refused by the SSRF guard or our scheme rule, blocked; a redirect,
// redirect; a deadline or network timeout, timeout; a certificate or TLS
// failure, tls; anything else, network. nil is ClassNone.
func ClassifyError(err error) notifytype.ErrorClass {
	switch {
	case err == nil:
		return notifytype.ClassNone
	case isBlocked(err):
		return notifytype.ClassBlocked
	case errors.Is(err, ErrRedirect):
		return notifytype.ClassRedirect
	case isTimeout(err):
		return notifytype.ClassTimeout
	case isTLS(err):
		return notifytype.ClassTLS
	default:
		return notifytype.ClassNetwork
	}
}

func isBlocked(err error) bool {
	for _, target := range []error{
		ErrInsecureScheme, ErrInvalidURL,
		ssrf.ErrProhibitedIP, ssrf.ErrProhibitedPort, ssrf.ErrProhibitedNetwork, ssrf.ErrInvalidHostPort,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTLS(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		ech      *tls.ECHRejectionError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		roots    x509.SystemRootsError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &record), errors.As(err, &alert), errors.As(err, &ech),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &roots):
		return true
	}
	// Handshake failures the tls package reports as plain errors.
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "x509: ")
}
