// Package sinks delivers notifications: one adapter per sink kind
// (sinks/gotify, sinks/apprise), the rules that render an outbox row's
// Content into a Message (REQ-9), the SSRF-guarded HTTP client every
// adapter sends through (REQ-10), and the one place a failed attempt is
// classified into an error class (D11).
//
// An Adapter's Deliver makes exactly one attempt and reports a Result: its
// class ("" when delivered), the HTTP status, a Retry-After the server
// asked for, and an error already redacted of tokens, Apprise URLs,
// authorization values, bodies and request URLs. Retrying, budgets and
// recording are the caller's (the actors'); nothing here logs.
//
// The package imports only the vocabulary (notifytype) and the standard
// library, plus code.dny.dev/ssrf for the dial-time guard.
package sinks
