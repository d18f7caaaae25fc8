package web

import (
	"net/http"
	"net/url"
	"strings"
)

// requireOwnOrigin refuses a state-changing request (any method but GET,
// HEAD, OPTIONS) that carries neither Origin nor Sec-Fetch-Site, unless
// its Referer is the server's own origin (issue 24 item 7).
// http.CrossOriginProtection, which runs first, decides every request
// that carries one of those two; a request with neither is one it lets
// through as "not from a browser", and a form a browser posts always
// carries one, or at least a Referer. So a form post with only a foreign
// Referer, or with none of the three, is refused with the styled 403,
// changing nothing. The own origin is base's (SWITCHBOARD_BASE_URL), or
// when base is unset the request's Host.
func requireOwnOrigin(base string, deny, next http.Handler) http.Handler {
	own := origin(base)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" {
			next.ServeHTTP(w, r)
			return
		}
		if ref := r.Header.Get("Referer"); ref != "" {
			if own != "" && origin(ref) == own {
				next.ServeHTTP(w, r)
				return
			}
			if u, err := url.Parse(ref); own == "" && err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
				next.ServeHTTP(w, r)
				return
			}
		}
		deny.ServeHTTP(w, r)
	})
}

// origin is scheme://host[:port] of an absolute http(s) URL, lowercased,
// the default port dropped; "" for anything else.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return ""
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
	return scheme + "://" + host
}
