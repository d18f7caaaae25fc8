package mcpserver

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/notifytype"
)

// OriginAllowed returns the Origin check of /mcp for a server whose
// SWITCHBOARD_BASE_URL is baseURL. The MCP streamable HTTP transport says a
// server MUST validate Origin against DNS rebinding: a page of another
// origin whose name was rebound to this server's address would otherwise
// reach it from a browser. The rule, given the Origin header and the local
// address the request arrived on:
//
//   - no Origin: allowed. Agents, SDK clients, curl and proxies send none;
//     only browsers send one, and they always do on a cross-origin POST.
//   - the origin of baseURL (scheme, host and port; case and a default
//     port do not matter): allowed, a page of this server itself.
//   - a loopback origin (http or https on localhost, 127.0.0.0/8 or ::1,
//     any port) when the request arrived on a loopback address: allowed, a
//     page on the machine that runs the server (the MCP Inspector's web UI,
//     say). A rebinding page's origin is the attacker's name, never a
//     loopback one.
//   - anything else, "null" included: refused.
func OriginAllowed(baseURL string) func(origin, localAddr string) bool {
	own, _ := normalOrigin(baseURL)
	return func(origin, localAddr string) bool {
		if origin == "" {
			return true
		}
		o, ok := normalOrigin(origin)
		if !ok {
			return false
		}
		if own != "" && o == own {
			return true
		}
		u, err := url.Parse(o)
		if err != nil {
			return false
		}
		return isLoopbackHost(u.Hostname()) && isLoopbackAddr(localAddr)
	}
}

// normalOrigin is the scheme://host[:port] of an http or https URL,
// lowercased and without a default port.
func normalOrigin(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// checkOrigin answers 403 forbidden to a request whose Origin is not
// allowed, before its credential is looked at.
func (s *surface) checkOrigin(next http.Handler) http.Handler {
	allowed := OriginAllowed(s.d.BaseURL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := ""
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
			local = a.String()
		}
		if !allowed(r.Header.Get("Origin"), local) {
			recordOf(r.Context()).set(outcomeForbiddenOrigin, "")
			httpx.WriteError(w, r, s.log, notifytype.Forbidden(
				"this origin may not use the MCP endpoint: only the server's own origin (SWITCHBOARD_BASE_URL), "+
					"a loopback page when the server is reached on loopback, or a client that sends no Origin"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
