package apprise

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// hostMode says when an Apprise URL's host is a server the Apprise server
// connects to.
type hostMode int

const (
	// hostAlways: the host is always the server (gotify://HOST/token).
	hostAlways hostMode = iota + 1
	// hostUnlessCloud: the host is the server when the URL also names a
	// path, a "to" or "mode" argument, or a password; bare, the "host" is
	// a topic or token for the service's own cloud (ntfy://topic,
	// notica://token, matrix://token for t2bot, lametric://token@app).
	hostUnlessCloud
)

// hostSchemes are the Apprise schemes whose URL carries the host of the
// server the Apprise server connects to: Apprise's services with a host
// token (Apprise 1.2's details(); a test compares them with the installed
// Apprise), less mailgun, smtp2go and sparkpost, whose "host" is the
// sender's mail domain, not a server.
var hostSchemes = map[string]hostMode{
	"apprise": hostAlways, "apprises": hostAlways, "bark": hostAlways, "barks": hostAlways,
	"emby": hostAlways, "embys": hostAlways, "enigma2": hostAlways, "enigma2s": hostAlways,
	"form": hostAlways, "forms": hostAlways, "gotify": hostAlways, "gotifys": hostAlways,
	"growl": hostAlways, "hassio": hostAlways, "hassios": hostAlways, "json": hostAlways,
	"jsons": hostAlways, "kodi": hostAlways, "kodis": hostAlways, "mailto": hostAlways,
	"mailtos": hostAlways, "mastodon": hostAlways, "mastodons": hostAlways, "mmost": hostAlways,
	"mmosts": hostAlways, "mqtt": hostAlways, "mqtts": hostAlways, "ncloud": hostAlways,
	"nclouds": hostAlways, "nctalk": hostAlways, "nctalks": hostAlways, "parsep": hostAlways,
	"parseps": hostAlways, "pjet": hostAlways, "pjets": hostAlways, "rocket": hostAlways,
	"rockets": hostAlways, "signal": hostAlways, "signals": hostAlways, "smseagle": hostAlways,
	"smseagles": hostAlways, "syslog": hostAlways, "toot": hostAlways, "toots": hostAlways,
	"xbmc": hostAlways, "xbmcs": hostAlways, "xml": hostAlways, "xmls": hostAlways,
	"lametric": hostUnlessCloud, "lametrics": hostUnlessCloud, "matrix": hostUnlessCloud,
	"matrixs": hostUnlessCloud, "notica": hostUnlessCloud, "noticas": hostUnlessCloud,
	"ntfy": hostUnlessCloud, "ntfys": hostUnlessCloud,
}

// HostSchemes lists the schemes Hosts finds hosts in, sorted.
func HostSchemes() []string {
	out := make([]string, 0, len(hostSchemes))
	for s := range hostSchemes {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Hosts returns the hosts inside an Apprise URL that the Apprise server
// would connect to on our behalf, to be checked by the SSRF guard's rule
// (sinks.CheckHost) before the URL is handed over: the URL's host, read as
// Apprise reads it (the user part ends at the first "@"; a port, brackets
// around IPv6 are cut), for the schemes of hostSchemes, and a mailto URL's
// smtp argument. A host written as an address (or localhost, or with a
// trailing dot) is returned for those schemes whatever the mode, as it
// needs no lookup; a name only when the URL's mode makes it the server, so
// that a topic or a token is never sent to DNS. Nil for other schemes.
func Hosts(u string) []string {
	u = strings.TrimSpace(u)
	raw, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil
	}
	scheme := strings.ToLower(raw)
	mode := hostSchemes[scheme]
	if mode == 0 {
		return nil
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/\\?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	pathPart, query, _ := strings.Cut(tail, "?")
	pathPart, _, _ = strings.Cut(pathPart, "#")
	query, _, _ = strings.Cut(query, "#")
	userinfo, hostport := "", authority
	if parts := strings.FieldsFunc(authority, func(r rune) bool { return r == '@' }); strings.Contains(authority, "@") && len(parts) >= 2 {
		userinfo, hostport = parts[0], parts[1]
	}
	host := hostOf(hostport)
	args, _ := url.ParseQuery(query)
	var out []string
	if host != "" {
		switch {
		case mode == hostAlways, addressLike(host):
			out = append(out, host)
		case strings.Trim(pathPart, "/\\") != "", args.Has("to"), args.Has("mode"), strings.Contains(userinfo, ":"):
			out = append(out, host)
		}
	}
	if scheme == "mailto" || scheme == "mailtos" {
		if smtp := hostOf(args.Get("smtp")); smtp != "" {
			out = append(out, smtp)
		}
	}
	return out
}

// hostOf cuts the port off host[:port]; an IPv6 address may come with or
// without brackets.
func hostOf(hostport string) string {
	hostport = strings.TrimSpace(hostport)
	if strings.HasPrefix(hostport, "[") {
		if end := strings.Index(hostport, "]"); end > 0 {
			return hostport[:end+1]
		}
		return hostport
	}
	if _, err := netip.ParseAddr(hostport); err == nil {
		return hostport
	}
	if i := strings.LastIndex(hostport, ":"); i >= 0 {
		return hostport[:i]
	}
	return hostport
}

// addressLike reports a host that is an address or this machine without a
// lookup: an IP address (with brackets, a zone or trailing dots), one to
// four decimal or 0x-hexadecimal labels that some resolver reads as IPv4
// (2130706433, 0x7f.1), or localhost.
func addressLike(host string) bool {
	h := strings.ToLower(strings.TrimRight(strings.Trim(host, "[]"), "."))
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	labels := strings.Split(h, ".")
	if h == "" || len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		digits, hex := strings.CutPrefix(l, "0x")
		alphabet := "0123456789"
		if hex {
			alphabet += "abcdef"
		}
		if digits == "" || strings.Trim(digits, alphabet) != "" {
			return false
		}
	}
	return true
}
