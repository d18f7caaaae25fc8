package sinks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"code.dny.dev/ssrf"
)

// Resolver looks a host name up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// BlockedAddresses resolves the host of a base URL, without dialling, and
// returns the addresses the SSRF guard would refuse at send time (private,
// loopback and other special-purpose ranges not in allowed, the operator's
// SWITCHBOARD_PRIVATE_HOSTS). A save-time warning comes from it: DNS can
// change before the send, so the guard still decides at dial time. The
// error never repeats the URL.
func BlockedAddresses(ctx context.Context, r Resolver, base string, allowed []netip.Prefix) ([]netip.Addr, error) {
	u, err := ParseBaseURL(base)
	if err != nil {
		return nil, err
	}
	return BlockedHostAddresses(ctx, r, u.Hostname(), allowed)
}

// BlockedHostAddresses is BlockedAddresses for a bare host: an IP address
// (IPv6 with or without brackets) or a name, which r resolves (nil: the
// system's resolver). A host the guard refuses whatever it resolves to (an
// address or localhost spelt with a trailing dot, another IPv4 spelling
// such as 2130706433) is ErrInvalidURL. The error never repeats the host.
func BlockedHostAddresses(ctx context.Context, r Resolver, host string, allowed []netip.Prefix) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" || otherAddressSpelling(host) {
		return nil, ErrInvalidURL
	}
	if r == nil {
		r = net.DefaultResolver
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.WithZone("")}
	} else if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("error resolving the server's host name: %w", scrubHost(err, host))
	}
	guard := newGuardian(allowed)
	var blocked []netip.Addr
	for _, a := range addrs {
		if guard.SafeAddr(a.Unmap()) != nil {
			blocked = append(blocked, a)
		}
	}
	return blocked, nil
}

// ErrPrivateHost refuses, at send time, a host that another server would
// connect to on our behalf (the host inside a stateless Apprise URL) when
// it resolves to an address the SSRF guard refuses. It is ssrf's
// ErrProhibitedIP too (errors.Is), so it is classified blocked.
var ErrPrivateHost = fmt.Errorf("a host resolves to a private, loopback or special-purpose address the operator has not allowed: %w", ssrf.ErrProhibitedIP)

// CheckHost is the send-time check of a host that is not ours to dial: the
// host inside a stateless Apprise URL, which the Apprise server connects
// to. It applies the guard's rule as the dialer does for a sink's own
// server, only before the hand-over, and stricter: every address the name
// resolves to must pass (the other server may use any of them), else
// ErrPrivateHost (class blocked). A host the guard refuses however it
// resolves is ErrInvalidURL (class blocked); a name that does not resolve
// is the resolver's error (class network or timeout, retried). No error
// repeats the host.
func CheckHost(ctx context.Context, r Resolver, host string, allowed []netip.Prefix) error {
	blocked, err := BlockedHostAddresses(ctx, r, host, allowed)
	if err != nil {
		return err
	}
	if len(blocked) > 0 {
		return ErrPrivateHost
	}
	return nil
}

// scrubHost returns err with host cut out of its text (a *net.DNSError
// names it), still answering errors.Is and Timeout like err.
func scrubHost(err error, host string) error {
	msg := err.Error()
	if host == "" || !strings.Contains(msg, host) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(msg, host, "<host>"), orig: err}
}
