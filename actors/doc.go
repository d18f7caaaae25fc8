// Package actors runs one actor per active sink under a suture supervisor.
//
// A SinkActor is a suture.Service that owns, for its sink: a mailbox of
// claimed outbox rows, a rate.Limiter mirroring the sink's budget (the
// database is the truth; the mirror is for status and for knowing when the
// next token returns), the timer that flushes held rows when a token
// returns, and its status, which Status reads at any time without blocking
// the actor. The actor delivers one row at a time through a Worker, which
// does the database and network work; the actor only decides when.
//
// An actor with nothing to do stops after an idle period and returns
// suture.ErrDoNotRestart; the Supervisor starts it again when a row for its
// sink is dispatched. A panic in a Worker (an adapter) restarts that actor
// only: the row it was delivering stays claimed in the database and is
// delivered again when its claim expires.
package actors
