// Package liveness is scenario 9 of the reliability suite (issue 23,
// defects 4 and 5): instances that lose their database for a while, and
// stops that cannot finish in time.
//
//   - 9a: three engines drain a private PostgreSQL cluster (package
//     pgcluster) that is frozen for 30 s (SIGSTOP of the postmaster and
//     every backend) mid-drain. Every heartbeat lapses during the pause;
//     no instance may take another's rows before that instance has
//     written its outcomes: 0 rows delivered before the database came back
//     are sent again.
//   - 9c: as 9a, but the server is stopped (every connection cut) and
//     started again 30 s later, as in a failover.
//   - 9b: a stop whose caller's bound is shorter than the drain (the
//     outcome writes wait for a lock): Stop reports it, the engine goes on
//     stopping, records what it sent and releases the rest; another engine
//     drains the rest: nothing is resent.
package liveness
