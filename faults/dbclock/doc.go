// Package dbclock is scenario 3d of the reliability suite (issue 18, item
// 5): the database's clock under a full pool and under skew. An engine on
// a pool of two connections, both held by the host's transactions just as
// a clock reading falls due, must keep every caller's wait bounded by its
// own ctx (an Emit in the host's transaction reads the clock through that
// transaction; a caller with a deadline gets its ctx's error) and deliver
// again once the pool frees, no goroutine left waiting. A digest sent by
// an instance whose own clock is a day off must be due at the database's
// time.
package dbclock
