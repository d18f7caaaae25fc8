package sinks_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
)

// staticResolver answers every name with the same addresses (or error).
type staticResolver struct {
	addrs []netip.Addr
	err   error
}

func (r staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return r.addrs, r.err
}

// TestBlockedAddresses: the save-time check resolves without dialling and
// reports exactly the addresses the guard refuses at send time, less the
// operator's allowlist; it never repeats the URL in an error.
func TestBlockedAddresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := netip.MustParseAddr
	for _, tc := range []struct {
		name    string
		base    string
		dns     staticResolver
		allowed []netip.Prefix
		want    []netip.Addr
	}{
		{name: "loopback literal", base: "http://127.0.0.1:8080", want: []netip.Addr{addr("127.0.0.1")}},
		{name: "private literal", base: "https://10.0.0.7", want: []netip.Addr{addr("10.0.0.7")}},
		{name: "ipv6 loopback", base: "https://[::1]:8443", want: []netip.Addr{addr("::1")}},
		{name: "public literal", base: "https://93.184.216.34"},
		{name: "allowed by the operator", base: "http://127.0.0.1:8080", allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		{name: "name resolving to a private address", base: "https://gotify.internal",
			dns: staticResolver{addrs: []netip.Addr{addr("93.184.216.34"), addr("192.168.1.20")}}, want: []netip.Addr{addr("192.168.1.20")}},
		{name: "name resolving to public only", base: "https://gotify.example.net", dns: staticResolver{addrs: []netip.Addr{addr("93.184.216.34")}}},
		{name: "mapped ipv4 loopback", base: "https://gotify.example.net", dns: staticResolver{addrs: []netip.Addr{addr("::ffff:127.0.0.1")}},
			want: []netip.Addr{addr("::ffff:127.0.0.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sinks.BlockedAddresses(ctx, tc.dns, tc.base, tc.allowed)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	_, err := sinks.BlockedAddresses(ctx, staticResolver{err: errors.New("no such host")}, "https://nowhere.example.net", nil)
	require.Error(t, err)
	_, err = sinks.BlockedAddresses(ctx, nil, "https://user:canary-pw@host.example.net", nil)
	require.ErrorIs(t, err, sinks.ErrInvalidURL)
	require.NotContains(t, err.Error(), "canary-pw")
}

// trailingDotHosts name the loopback address, or this machine, with a
// trailing dot: Go's resolver sends them to DNS (a network error, retried),
// other resolvers and the Apprise server read them as loopback.
var trailingDotHosts = []string{
	"127.0.0.1.", "127.0.0.1..", "LOCALHOST.", "localhost.", "LocalHost.", "gotify.localhost.",
	"10.0.0.7.", "0x7f.0.0.1.", "2130706433.",
}

// TestTrailingDotHostsAreBlocked: such a host is refused wherever the
// guard classifies hosts, as class blocked (final), even when the
// operator allows the loopback range, and the error never repeats it.
func TestTrailingDotHostsAreBlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	dns := staticResolver{addrs: []netip.Addr{netip.MustParseAddr("93.184.216.34")}}
	for _, host := range trailingDotHosts {
		base := "https://" + host + ":8443/gotify"
		require.ErrorIs(t, sinks.CheckURL(base, true), sinks.ErrInvalidURL, host)
		_, err := sinks.Endpoint(base, "message")
		require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err), host)
		_, err = sinks.BlockedAddresses(ctx, dns, base, loopback)
		require.ErrorIs(t, err, sinks.ErrInvalidURL, host)
		err = sinks.CheckHost(ctx, dns, host, loopback)
		require.Equal(t, notifytype.ClassBlocked, sinks.ClassifyError(err), host)
		require.NotContains(t, err.Error(), strings.TrimRight(host, "."))
	}
	// A name with a trailing dot that is neither stays a name.
	require.NoError(t, sinks.CheckURL("https://gotify.example.net./", false))
	require.NoError(t, sinks.CheckHost(ctx, dns, "gotify.example.net.", nil))
}

// TestCheckHost: the send-time check of a host another server connects to
// refuses, as blocked, any host one of whose addresses the guard refuses,
// unless the operator allows it; a name that does not resolve is a
// network error that does not name the host.
func TestCheckHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := netip.MustParseAddr
	for _, tc := range []struct {
		name    string
		host    string
		dns     staticResolver
		allowed []netip.Prefix
		class   notifytype.ErrorClass
	}{
		{name: "loopback", host: "127.0.0.1", class: notifytype.ClassBlocked},
		{name: "bracketed ipv6 loopback", host: "[::1]", class: notifytype.ClassBlocked},
		{name: "bare ipv6 loopback", host: "::1", class: notifytype.ClassBlocked},
		{name: "mapped loopback", host: "[::ffff:127.0.0.1]", class: notifytype.ClassBlocked},
		{name: "metadata", host: "169.254.169.254", class: notifytype.ClassBlocked},
		{name: "private, allowed", host: "10.1.2.3", allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		{name: "public", host: "93.184.216.34"},
		{name: "name, one private address", host: "gotify.internal",
			dns: staticResolver{addrs: []netip.Addr{addr("93.184.216.34"), addr("192.168.1.20")}}, class: notifytype.ClassBlocked},
		{name: "name, public", host: "gotify.example.net", dns: staticResolver{addrs: []netip.Addr{addr("93.184.216.34")}}},
		{name: "name, not found", host: "nowhere.example.net",
			dns: staticResolver{err: &net.DNSError{Err: "no such host", Name: "nowhere.example.net", IsNotFound: true}}, class: notifytype.ClassNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := sinks.CheckHost(ctx, tc.dns, tc.host, tc.allowed)
			require.Equal(t, tc.class, sinks.ClassifyError(err), "%v", err)
			if err != nil {
				require.NotContains(t, err.Error(), strings.Trim(tc.host, "[]"))
			}
		})
	}
}
