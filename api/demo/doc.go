// Package demo is what `make run` shows a newcomer: two local receivers (a
// Gotify stand-in and an Apprise API stand-in on loopback, which the demo
// server puts on its private-host allowlist), a sink of each kind for the
// demo owner subscribed to dead letters, and a page with a button that
// makes a todo dead-letter, so a notification can be watched end to end.
package demo
