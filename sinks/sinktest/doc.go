// Package sinktest holds what the sink adapters' tests share: recording
// httptest servers, a guarded client that may reach them, a leak check
// that plants canary secrets (a Gotify token, Apprise URLs, an
// authorization value, a message body) and asserts none appears in any
// byte written to a log handler, any error string or any result, and the
// delivery suite every HTTP adapter runs: each status and transport failure
// with the class it must report, each with the leak check.
//
// It is imported by tests only.
package sinktest
