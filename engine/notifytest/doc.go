// Package notifytest is the engine's test kit for a program that embeds
// it, as rivertest is River's:
//
//   - RequireEmittedTx and RequireNotEmittedTx assert, inside your own
//     transaction (committed or not), what your code emitted, with no
//     engine started;
//   - Deliver runs one pass of a started engine's delivery now (fan out,
//     claim what is due, wait until each attempt is recorded), so a test
//     asserts an outcome without waiting for a poll;
//   - Gotify is a stand-in Gotify server that keeps what it receives.
//
// It depends on the engine's packages and the standard library alone: no
// test framework, no database or host of its own. An event reaches the
// outbox only when a subscription of its owner matched it at commit (an
// event nobody subscribed to reaches no one and is not written), so the
// assertions see what will be delivered.
package notifytest
