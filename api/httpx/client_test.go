package httpx_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api/httpx"
)

// The client a request is counted as (issue 24 item 6): forwarding
// headers are read only from a configured proxy, right to left past the
// proxies; the rightmost untrusted address wins; both headers naming
// different clients, or none readable, leave the peer.
func TestResolveClientTrustsForwardingOnlyFromConfiguredProxies(t *testing.T) {
	t.Parallel()
	proxies := httpx.Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name, peer string
		header     map[string]string
		want       string
	}{
		{"no proxy configured for the peer", "192.0.2.1:5000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "192.0.2.1"},
		{"a proxy's one entry", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "198.51.100.1"},
		{"rightmost untrusted wins", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.1"}, "198.51.100.1"},
		{"proxies in the chain are skipped", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.1, 10.1.1.1"}, "198.51.100.1"},
		{"Forwarded, quoted IPv6 with a port", "10.0.0.2:5000", map[string]string{"Forwarded": `for=203.0.113.9, for="[2001:db8::5]:4711";proto=https`}, "2001:db8::5"},
		{"both headers agree", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "198.51.100.1", "Forwarded": "for=198.51.100.1"}, "198.51.100.1"},
		{"both headers disagree: the peer", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "198.51.100.1", "Forwarded": "for=198.51.100.2"}, "10.0.0.2"},
		{"an unreadable entry: the peer", "10.0.0.2:5000", map[string]string{"X-Forwarded-For": "198.51.100.1, garbage"}, "10.0.0.2"},
		{"Forwarded obfuscated: the peer", "10.0.0.2:5000", map[string]string{"Forwarded": "for=_hidden"}, "10.0.0.2"},
		{"no header from a proxy: the peer", "10.0.0.2:5000", nil, "10.0.0.2"},
		{"an IPv4-mapped peer is a proxy too", "[::ffff:10.0.0.2]:5000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "198.51.100.1"},
		{"an IPv6 proxy", "[fd00::1]:5000", map[string]string{"X-Forwarded-For": "2001:db8::7"}, "2001:db8::7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			require.Equal(t, netip.MustParseAddr(tc.want), httpx.ResolveClient(proxies, tc.peer, h))
		})
	}
}

// The limits count an IPv6 client by its /64 (issue 24 item 6): addresses
// of one /64 share the failed-auth bucket, another /64 has its own; an
// IPv4 client is its address.
func TestFailedAuthLimitCountsAnIPv6ClientPerSlash64(t *testing.T) {
	t.Parallel()
	from := func(remote string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		return r
	}
	require.Equal(t, "2001:db8:1:2::/64", httpx.ClientAddr(from("[2001:db8:1:2::1]:1000")))
	require.Equal(t, "192.0.2.1", httpx.ClientAddr(from("192.0.2.1:1000")))
	require.Equal(t, "192.0.2.1", httpx.ClientAddr(from("[::ffff:192.0.2.1]:1000")))

	f := httpx.NewAuthFailures(60, 3, nil)
	for i := range 3 {
		require.NoError(t, f.Fail(from("[2001:db8:1:2::"+string(rune('a'+i))+"]:1000"), ""))
	}
	var tmf *httpx.TooManyFailures
	require.ErrorAs(t, f.Fail(from("[2001:db8:1:2:ffff:ffff:ffff:fffe]:1"), ""), &tmf, "another address of the same /64")
	require.NoError(t, f.Fail(from("[2001:db8:1:3::1]:1"), ""), "another /64")
}
