package sinks_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

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
