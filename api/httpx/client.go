package httpx

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The client of a request (issue 24 item 6) is the address the limits key
// on: the failed-authentication limit (AuthFailures) and the connection
// share (api.ServerConfig.MaxConnsPerClient). It is the connection's peer,
// unless that peer is a configured proxy (SWITCHBOARD_TRUSTED_PROXIES):
// then it is read from the proxy's X-Forwarded-For or Forwarded header,
// right to left, skipping the configured proxies; the first address that
// is not one (the rightmost untrusted) is the client. Entries left of it
// were written by the client and are never read. An IPv6 client is its
// /64 (one host's or one subscriber's allocation), an IPv4 one its
// address.

type clientKey struct{}

// Proxies is the set of trusted reverse proxies.
type Proxies []netip.Prefix

// Trusts reports whether a is one of the proxies.
func (p Proxies) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pr := range p {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// RealClient records each request's client (its connection's peer, or the
// address a trusted proxy forwarded) in the request's context, where
// ClientAddr reads it.
func RealClient(trusted Proxies, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := ResolveClient(trusted, r.RemoteAddr, r.Header)
		if c.IsValid() {
			r = r.WithContext(context.WithValue(r.Context(), clientKey{}, c))
		}
		next.ServeHTTP(w, r)
	})
}

// ResolveClient is the client of a request from peer (its RemoteAddr) with
// header h: the peer itself unless it is a trusted proxy; then the
// rightmost address of the forwarding header that is not a trusted proxy.
// X-Forwarded-For is read, or Forwarded when the request has no
// X-Forwarded-For; when it has both and they name different clients, the
// peer is the client (one of them was written by the client, and the
// request cannot say which). A proxy that forwards no readable address
// leaves the peer as the client.
func ResolveClient(trusted Proxies, peer string, h http.Header) netip.Addr {
	p := PeerAddr(peer)
	if !p.IsValid() || !trusted.Trusts(p) {
		return p
	}
	xff, okX := rightmostUntrusted(trusted, forwardedFor(h.Values("X-Forwarded-For")))
	fwd, okF := rightmostUntrusted(trusted, forwardedParam(h.Values("Forwarded")))
	switch {
	case okX && okF:
		if xff == fwd {
			return xff
		}
		return p
	case okX:
		return xff
	case okF:
		return fwd
	}
	return p
}

// rightmostUntrusted walks the chain right to left past trusted proxies.
// ok is false when the chain is empty or an entry before the client does
// not parse (the chain cannot be followed further: no client is named).
func rightmostUntrusted(trusted Proxies, chain []string) (netip.Addr, bool) {
	for i := len(chain) - 1; i >= 0; i-- {
		a := parseHostMaybePort(chain[i])
		if !a.IsValid() {
			return netip.Addr{}, false
		}
		if !trusted.Trusts(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// forwardedFor splits X-Forwarded-For values into their entries, in order.
func forwardedFor(values []string) []string {
	var out []string
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// forwardedParam is the for= of each element of Forwarded (RFC 7239), in
// order; an element without one is an entry that does not parse.
func forwardedParam(values []string) []string {
	var out []string
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(elem) == "" {
				continue
			}
			forValue := "-"
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					forValue = strings.Trim(strings.TrimSpace(val), `"`)
				}
			}
			out = append(out, forValue)
		}
	}
	return out
}

// parseHostMaybePort reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port".
func parseHostMaybePort(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap()
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// PeerAddr is the IP of a RemoteAddr ("ip:port"), the zero Addr when it
// has none.
func PeerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// ClientKey is the key the limits count a client address under: an IPv4
// address, or the /64 of an IPv6 one (a host has a whole /64 to pick
// addresses from).
func ClientKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}

// ClientAddr is the request's client as the limits key it: ClientKey of
// the address RealClient recorded, or of the connection's peer.
func ClientAddr(r *http.Request) string {
	if a, ok := r.Context().Value(clientKey{}).(netip.Addr); ok {
		return ClientKey(a)
	}
	if a := PeerAddr(r.RemoteAddr); a.IsValid() {
		return ClientKey(a)
	}
	return r.RemoteAddr
}

// authenticatedKey carries the hook a connection's server marks it
// authenticated with.
type authenticatedKey struct{}

// WithAuthenticatedHook returns ctx carrying mark, which Authenticated
// calls: the server puts one in each connection's context, so that a
// connection whose request presented a valid credential keeps its place
// under pressure (api's connection reserve).
func WithAuthenticatedHook(ctx context.Context, mark func()) context.Context {
	return context.WithValue(ctx, authenticatedKey{}, mark)
}

// Authenticated records that the request of ctx presented a valid
// credential (a token, a session, a signed delivery, a login link).
func Authenticated(ctx context.Context) {
	if mark, ok := ctx.Value(authenticatedKey{}).(func()); ok {
		mark()
	}
}
