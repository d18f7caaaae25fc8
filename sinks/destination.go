package sinks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
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
	if r == nil {
		r = net.DefaultResolver
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("error resolving the server's host name: %w", err)
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
