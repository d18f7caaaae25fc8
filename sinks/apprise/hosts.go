package apprise

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

//go:generate sh -c "/usr/bin/python3 -W ignore testdata/hostfields.py | gofmt > hostfields_gen.go"

// hostMode says when an Apprise URL's host is a server the Apprise server
// connects to.
type hostMode int

const (
	// hostAlways: the host is always the server (gotify://HOST/token).
	hostAlways hostMode = iota + 1
	// hostUnlessCloud: the host is the server when the URL also names a
	// path, a "to" or "mode" argument, or credentials (namesServer); bare,
	// the "host" is a topic or token for the service's own cloud
	// (ntfy://topic, notica://token, lametric://cloudtoken@app).
	hostUnlessCloud
	// hostDotted: the host is the server when it has a dot; without one
	// it is a name under the service's own domain (zulip://bot@ORG/… is
	// https://ORG.zulipchat.com, zulip://bot@chat.example.net/… is
	// https://chat.example.net).
	hostDotted
)

// hostField says which fields of a scheme's URL name a host Apprise
// connects to: the URL's host (Mode, 0 for never) and query arguments
// (Params, lower-case names).
type hostField struct {
	Mode   hostMode
	Params []string
}

// modeOverrides correct the generated table where probing sample URLs
// cannot tell the whole rule: zulip's host is the server only with a dot
// (https://ORG.zulipchat.com otherwise), which the probe reports as
// "unless cloud".
var modeOverrides = map[string]hostMode{
	"zulip": hostDotted,
}

// fieldsOf returns the host-bearing fields of scheme's URLs: Apprise's
// own (hostFields, generated from the installed Apprise), corrected by
// modeOverrides. A scheme Apprise 1.2 does not have (an operator allowed
// a newer one) is taken to connect to its host, as nothing else can be
// known of it.
func fieldsOf(scheme string) hostField {
	f, ok := hostFields[scheme]
	if !ok {
		return hostField{Mode: hostAlways}
	}
	if m, ok := modeOverrides[scheme]; ok {
		f.Mode = m
	}
	return f
}

// HostSchemes lists the Apprise 1.2 schemes whose URLs can name a host
// the Apprise server connects to (Hosts finds hosts in them), sorted.
func HostSchemes() []string {
	var out []string
	for s := range hostFields {
		if f := fieldsOf(s); f.Mode != 0 || len(f.Params) > 0 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Hosts returns the hosts inside an Apprise URL that the Apprise server
// would connect to on our behalf, to be checked by the SSRF guard's rule
// (sinks.CheckHost) before the URL is handed over; nil for a URL that
// parseURL refuses (CheckSchemes refuses it too). See Destinations.
func Hosts(u string) []string {
	hosts, _ := Destinations(u)
	return hosts
}

// Destinations returns the hosts inside an Apprise URL that the Apprise
// server would connect to, read as Apprise reads it (parseURL, which
// refuses a URL any parser could read otherwise): the URL's host and the
// host-bearing query arguments (smtp=) of its scheme (fieldsOf), without
// their ports. A host written as an address (or localhost, or with a
// trailing dot) is returned whenever the scheme's host can be a server, as
// it needs no lookup; a name only when the URL's mode makes it the server,
// so that a topic or a token is never sent to DNS.
func Destinations(u string) ([]string, error) {
	p, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	f := fieldsOf(p.scheme)
	var out []string
	if h := p.host; h != "" {
		switch {
		case f.Mode == 0:
		case f.Mode == hostAlways, addressLike(h):
			out = append(out, h)
		case f.Mode == hostDotted && strings.Contains(h, "."):
			out = append(out, h)
		case f.Mode == hostUnlessCloud && p.namesServer():
			out = append(out, h)
		}
	}
	for _, name := range f.Params {
		if v := p.params[name]; v != "" {
			if h, ok := splitHost(v); ok && h != "" {
				out = append(out, h)
			}
		}
	}
	return out, nil
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

// HostFieldsVersion is the Apprise release the host-bearing fields were
// generated from.
const HostFieldsVersion = hostFieldsVersion

// HostParams returns the query arguments of scheme's URLs that name a
// host Apprise connects to (smtp for mailto).
func HostParams(scheme string) []string { return slices.Clone(fieldsOf(scheme).Params) }

// ServiceDomains returns the domains of the fixed hosts scheme's service
// connects to whatever its URL says (telegram.org for tgram), as the
// installed Apprise showed them when the table was generated.
func ServiceDomains(scheme string) []string { return slices.Clone(serviceDomains[scheme]) }

// localSchemes are Apprise's services that act on the Apprise server's
// own machine and reach no network.
var localSchemes = []string{"windows", "dbus", "kde", "qt", "glib", "gnome", "macosx"}

// NetworkSchemes lists every Apprise 1.2 scheme that reaches the network
// (all but the local-system ones), sorted.
func NetworkSchemes() []string {
	var out []string
	for s := range hostFields {
		if !slices.Contains(localSchemes, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// cloudAppToken is a LaMetric cloud application's access token, which
// Apprise tells from a device's API key by its shape.
var cloudAppToken = regexp.MustCompile(`^[A-Za-z0-9]{80,}==$`)

// namesServer reports, for a scheme whose host is a server unless the
// URL is for the service's own cloud (hostUnlessCloud), that it may be a
// server: the URL names a path, an argument Apprise reads as a topic or
// a mode (to, mode), or credentials (a user or password, in the URL or as
// arguments) other than a LaMetric cloud token. Wider than any one
// service's rule (ntfy's, notica's, matrix's, lametric's), so that a host
// is looked up whenever one of them could connect to it.
func (p appriseURL) namesServer() bool {
	if strings.Trim(p.path, "/") != "" {
		return true
	}
	for _, k := range []string{"to", "mode", "user", "password", "pass"} {
		if _, ok := p.params[k]; ok {
			return true
		}
	}
	if p.userinfo == "" {
		return false
	}
	user, pass, _ := strings.Cut(p.userinfo, ":")
	if pass == "" {
		pass = user
	}
	return !cloudAppToken.MatchString(strings.Trim(pass, ":"))
}
