// Package actors runs one actor per active sink under a suture supervisor.
//
// A SinkActor is a suture.Service that owns, for its sink: a mailbox of
// claimed outbox rows, a rate.Limiter mirroring the sink's budget (the
// database is the truth; the mirror is for status and for knowing when the
// next token returns), the timer that flushes held rows when a token
// returns, and its status, which Status reads at any time without blocking
// the actor. Each step of the actor delivers, through a Worker, every row
// queued when it began (in order: the Worker reserves them together and
// sends them one after another), or flushes the held rows; the Worker
// does the database and network work, the actor only decides when.
//
// An actor with nothing to do stops after an idle period and returns
// suture.ErrDoNotRestart; the Supervisor starts it again when a row for its
// sink is dispatched. The engine's Worker recovers an adapter's panic into
// a failed attempt (class abandoned); a panic that escapes a Worker still
// restarts that actor only, and the rows of that step stay claimed in the
// database until their claims expire. When the Supervisor stops, the
// rows still queued in mailboxes are handed to Worker.Release, so they
// need not wait for their claims to expire.
package actors
