// Package ssrf is scenario 4 of the reliability suite: a corpus of hostile
// destinations sent through the guarded client of package sinks (the one
// every delivery uses), checked at dial time after resolution. Names are
// answered by a test DNS server that this package installs as the
// process's resolver, so a name can resolve to a loopback, private or
// metadata address, or to an allowed address first and a private one
// after (rebinding). Every destination must be refused as blocked (or, for
// a redirect, returned unfollowed as redirect), and the operator allowlist
// must let through exactly what it names.
package ssrf
