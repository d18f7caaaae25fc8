// Package skew is the clock-skew part of scenario 3 of the reliability
// suite: instances whose own clocks disagree with the database's by
// minutes and by a day share one database. Due times, claims and budgets
// must stay exact (every instant two instances compare comes from the
// database's clock, never an instance's own): an instance ahead of time must
// not send a row before it is due, take over a claim that has not expired,
// or find a token that the budget has not yet returned.
package skew
