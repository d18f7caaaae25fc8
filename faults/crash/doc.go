// Package crash is scenario 1 of the reliability suite: three real
// `switchboard-notify serve` processes, started as an operator would
// (environment variables only), drain due outbox rows from one database
// to a loopback Gotify-shaped receiver, and one is killed with SIGKILL
// mid-drain. It measures rows lost (must be 0), duplicate deliveries
// (bounded by the rows the killed process held claimed), the time until
// its claims are recovered, and the `abandoned` records (D25) matching the
// duplicates.
package crash
