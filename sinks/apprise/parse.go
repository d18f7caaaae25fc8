package apprise

import (
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/notify/notifytype"
)

// appriseURL is one Apprise URL as Apprise reads it (apprise.utils.
// parse_url and parse_qsd, from 1.2 on), for a URL parseURL accepts: one
// that no parser can read otherwise.
type appriseURL struct {
	scheme string
	// userinfo is what comes before the authority's "@", as written.
	userinfo string
	// host is the authority's host without its port, as written (an IPv6
	// address keeps its brackets).
	host string
	// path is what follows the authority up to the first "?".
	path string
	// params are the query's arguments by lower-cased name, their values
	// percent-decoded and trimmed, as Apprise's qsd holds them.
	params map[string]string
}

// ambiguous is the error of a URL whose meaning could differ between
// parsers; what says what, never the URL.
func ambiguous(what string) error {
	return notifytype.InvalidArgument("secret.urls", "an Apprise URL must read the same to every URL parser: "+what)
}

// parseURL reads u as Apprise does, and refuses (invalid_argument on
// secret.urls, naming what) every URL whose meaning could differ between
// Apprise's parser and another one (Go's, a browser's, a later Apprise's),
// so that the host Switchboard checks is the host Apprise connects to by
// construction, not because a list of tricks was foreseen:
//
//   - white space, control characters, text that is not UTF-8, or a
//     scheme that is not ASCII letters and digits (checkURLShape);
//   - a backslash anywhere (Apprise keeps it inside the user name, WHATWG
//     parsers end the host at it);
//   - a third slash after "scheme://" (Apprise skips any number of them);
//   - a "#" before the path (in the authority) or in the query (Apprise
//     reads the query to the end of the text, fragment included);
//   - more than one "@" in the authority (Apprise ends the user name at
//     the first, Go's parser at the last), or non-ASCII in it;
//   - a "%" in the host (percent-encoded host characters);
//   - for a scheme whose host Apprise connects to, a host that is not a
//     name of letters, digits, "-", "_" and ".", an IP address (IPv6 in
//     brackets, or bare), with an optional port of digits;
//   - a query argument named twice (Apprise takes the last, most parsers
//     the first), whatever the case (Apprise lower-cases names), or a
//     name that is not written in lower case letters, digits, "_", "."
//     and "-" (a "+", "-" or ":" prefix, Apprise's header and payload
//     arguments, may be followed by any case);
//   - for an argument whose value Apprise connects to (smtp=), a value
//     that is not a host as above, written plainly, without a port
//     (Apprise hands "host:port" to the mail library as a name).
func parseURL(u string) (appriseURL, error) {
	if err := checkURLShape(u); err != nil {
		return appriseURL{}, err
	}
	u = strings.TrimSpace(u)
	if strings.Contains(u, `\`) {
		return appriseURL{}, ambiguous(`no backslash (Apprise keeps it in the user name, other parsers end the host at it)`)
	}
	raw, rest, _ := strings.Cut(u, "://")
	p := appriseURL{scheme: strings.ToLower(raw)}
	if strings.HasPrefix(rest, "/") {
		return appriseURL{}, ambiguous("no third slash after scheme:// (Apprise skips it, other parsers read an empty host)")
	}
	pathPart, query, _ := strings.Cut(rest, "?")
	authority := pathPart
	if i := strings.IndexAny(pathPart, "/#"); i >= 0 {
		if pathPart[i] == '#' {
			return appriseURL{}, ambiguous(`no "#" before the path`)
		}
		authority, p.path = pathPart[:i], pathPart[i:]
	}
	if strings.Contains(query, "#") {
		return appriseURL{}, ambiguous(`no "#" in the query (Apprise reads past it, other parsers stop at it); write it as %23`)
	}
	if strings.Count(authority, "@") > 1 {
		return appriseURL{}, ambiguous(`at most one "@" before the host (write an "@" in a user name or password as %40)`)
	}
	for i := 0; i < len(authority); i++ {
		if authority[i] >= utf8.RuneSelf {
			return appriseURL{}, ambiguous("ASCII characters only before the path (percent-encode the others in a user name or password)")
		}
	}
	hostport := authority
	if i := strings.IndexByte(authority, '@'); i >= 0 {
		p.userinfo, hostport = authority[:i], authority[i+1:]
	}
	if strings.Contains(hostport, "%") {
		return appriseURL{}, ambiguous("no percent-encoded characters in the host")
	}
	f := fieldsOf(p.scheme)
	if f.Mode != 0 {
		host, ok := splitHost(hostport)
		switch {
		case !ok && strings.Count(hostport, ":") >= 2:
			return appriseURL{}, ambiguous("an IPv6 host must be written in full in lower-case hexadecimal, in brackets (Apprise 1.2 reads [2001:db8::1] as [2001:db8::], and cuts IPv4-mapped and fe80:: addresses too)")
		case !ok:
			return appriseURL{}, ambiguous("the host must be a name of letters, digits, - _ and ., or an IP address, with an optional port of digits")
		}
		p.host = host
	} else {
		p.host = hostOf(hostport)
	}
	params, written, err := parseQuery(query)
	if err != nil {
		return appriseURL{}, err
	}
	p.params = params
	for _, name := range f.Params {
		v, ok := written[name]
		if !ok || v == "" {
			continue
		}
		if h, ok := splitHost(v); !ok || h != v {
			return appriseURL{}, ambiguous("the " + name + " argument must be a host name or an IP address, not encoded, without a port (Apprise would read it as part of the name; use port=)")
		}
	}
	return p, nil
}

// parseQuery reads a query as Apprise's parse_qsd does (arguments split
// on "&" and ";", names lower-cased, values percent-decoded and trimmed),
// refusing what another parser could read otherwise (see parseURL).
//
// It returns the decoded values and the values as written.
func parseQuery(query string) (params, raw map[string]string, err error) {
	params, raw = map[string]string{}, map[string]string{}
	if query == "" {
		return params, raw, nil
	}
	for _, pair := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		name, value, _ := strings.Cut(pair, "=")
		if !paramName(name) {
			return nil, nil, ambiguous("argument names in lower case letters, digits, _ . and - (Apprise lower-cases them, other parsers do not)")
		}
		key := strings.ToLower(name)
		if _, dup := params[key]; dup {
			return nil, nil, ambiguous("each argument once (Apprise takes the last, other parsers the first)")
		}
		params[key] = strings.TrimFunc(pyUnquote(value), isPySpace)
		raw[key] = value
	}
	return params, raw, nil
}

// paramName reports a query argument name every parser reads alike:
// lower case letters, digits, "_", "." and "-"; or "+", "-" or ":" then
// letters of any case, digits, "_", "." and "-" (a header or payload
// field, which Apprise keeps as written).
func paramName(name string) bool {
	rest, prefixed := name, false
	if name != "" && strings.ContainsRune("+-:", rune(name[0])) {
		rest, prefixed = name[1:], true
	}
	if rest == "" {
		return false
	}
	for _, r := range rest {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		case prefixed && r >= 'A' && r <= 'Z':
		default:
			return false
		}
	}
	return true
}

// splitHost reads a strict host[:port]: a name of ASCII letters, digits,
// "-", "_" and "." (or nothing), an IPv6 address in brackets, or a bare
// IPv6 address (no port then), with an optional port of 1 to 5 digits.
// It returns the host as written, without the port.
func splitHost(hostport string) (string, bool) {
	host, port := hostport, ""
	switch {
	case strings.HasPrefix(hostport, "["):
		end := strings.IndexByte(hostport, ']')
		if end < 0 || !appriseReadsIPv6(hostport[1:end]) {
			return "", false
		}
		host, port = hostport[:end+1], hostport[end+1:]
		if port != "" {
			if port[0] != ':' {
				return "", false
			}
			port = port[1:]
		}
	case strings.Count(hostport, ":") >= 2:
		return hostport, appriseReadsIPv6(hostport)
	default:
		var hasPort bool
		host, port, hasPort = strings.Cut(hostport, ":")
		if hasPort && port == "" {
			return "", false
		}
		for _, r := range host {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
				return "", false
			}
		}
	}
	if len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", false
	}
	return host, true
}

// appriseIPv6 is the IPv6 pattern of Apprise's is_ipaddr, which Apprise
// matches at the start of the host only (re.match): on a longer text it
// returns the address it matched first, not the host as written
// ("[::ffff:127.0.0.1]" reads as "[::ffff:127]"). Go's regexp chooses the
// match a backtracking engine finds first, as Python's re does.
var appriseIPv6 = regexp.MustCompile(`^(?i)\[?(?P<ip>(([0-9a-f]{1,4}:){7,7}[0-9a-f]{1,4}|([0-9a-f]{1,4}:)` +
	`{1,7}:|([0-9a-f]{1,4}:){1,6}:[0-9a-f]{1,4}|([0-9a-f]{1,4}:){1,5}` +
	`(:[0-9a-f]{1,4}){1,2}|([0-9a-f]{1,4}:){1,4}` +
	`(:[0-9a-f]{1,4}){1,3}|([0-9a-f]{1,4}:){1,3}` +
	`(:[0-9a-f]{1,4}){1,4}|([0-9a-f]{1,4}:){1,2}` +
	`(:[0-9a-f]{1,4}){1,5}|[0-9a-f]{1,4}:` +
	`((:[0-9a-f]{1,4}){1,6})|:((:[0-9a-f]{1,4}){1,7}|:)|` +
	`fe80:(:[0-9a-f]{0,4}){0,4}%[0-9a-z]{1,}|::` +
	`(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]` +
	`|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|` +
	`1{0,1}[0-9]){0,1}[0-9])|([0-9a-f]{1,4}:){1,4}:((25[0-5]|` +
	`(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|` +
	`1{0,1}[0-9]){0,1}[0-9])))\]?`)

// appriseReadsIPv6 reports an IPv6 address (without brackets) that every
// parser reads as written: lower-case hexadecimal digits and colons (no
// dotted IPv4 tail, no zone; Apprise splits a port off "[...]" only
// then), a valid address, and one that Apprise's pattern matches whole.
func appriseReadsIPv6(addr string) bool {
	if strings.Trim(addr, "0123456789abcdef:") != "" {
		return false
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() {
		return false
	}
	m := appriseIPv6.FindStringSubmatch(addr)
	return m != nil && m[appriseIPv6.SubexpIndex("ip")] == addr
}

// pyUnquote is Python's urllib.parse.unquote: %XX sequences decoded, any
// other "%" kept, the bytes read as UTF-8 with invalid ones replaced.
func pyUnquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
