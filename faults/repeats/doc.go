// Package repeats is scenario 3c of the reliability suite: the repeats of
// a dedup key that arrive while the key's row is claimed and being sent,
// against sinks that fail before they recover, with three engines on one
// database. A repeat during a claim opens a row of its own; when the
// claimed row's attempt fails and it goes back to pending, the two would
// both be open, and the row's outcome violated outbox_open_key (23505).
// The recorder then retried that outcome forever and every other outcome
// of its instance stalled behind it (issue 18, item 1). Here every event
// must reach its sink (as messages with "and N more"), no outcome may be
// dropped or fail, no row may pass 7 attempts, and no sink may see a row
// twice.
package repeats
