package sinks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"code.dny.dev/ssrf"
)

// DefaultTimeout bounds one delivery attempt (REQ-10).
const DefaultTimeout = 10 * time.Second

var (
	// ErrInsecureScheme refuses a sink URL that is not https while the
	// operator has not opted in to plain HTTP (SWITCHBOARD_PUSH_ALLOW_HTTP),
	// or whose scheme is neither http nor https. At save time the engine
	// answers it as invalid_argument; at send time it is class blocked.
	ErrInsecureScheme = errors.New("sink URL must use https (http only with the operator's opt-in)")

	// ErrInvalidURL refuses a sink base URL that is not an absolute URL
	// with a host, or that carries credentials, a query or a fragment. At
	// save time the engine answers it as invalid_argument; at send time it
	// is class blocked.
	ErrInvalidURL = errors.New("sink URL must be an absolute http(s) URL with a host and no credentials, query or fragment")

	// ErrRedirect reports a redirect that was not followed (REQ-10). The
	// guarded client does not return it (it hands back the 3xx response,
	// classified redirect); it exists for callers whose client refuses
	// redirects with an error.
	ErrRedirect = errors.New("redirect not followed")
)

// GuardConfig configures the guarded HTTP client every sink delivery goes
// through.
type GuardConfig struct {
	// AllowHTTP permits plain http:// sink URLs (the operator's
	// SWITCHBOARD_PUSH_ALLOW_HTTP opt-in). Defaults to false: https only.
	AllowHTTP bool

	// AllowedPrefixes are the operator's private-host allowlist: address
	// ranges the SSRF guard lets through although they are private,
	// loopback or otherwise special-purpose. Defaults to none.
	AllowedPrefixes []netip.Prefix

	// Timeout bounds one attempt, from dial to the end of the response
	// headers and body. Defaults to DefaultTimeout (10 s).
	Timeout time.Duration

	// RootCAs are the certificate authorities sink servers are verified
	// against. Defaults to nil: the system's roots. (Added for operators
	// whose Gotify or Apprise server uses a private CA, and for tests.)
	RootCAs *x509.CertPool
}

// WithDefaults returns c with every unset field at its default.
func (c GuardConfig) WithDefaults() GuardConfig {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// NewClient returns the guarded HTTP client (REQ-10): a fresh transport
// that ignores proxy settings from the environment, dials only addresses
// the SSRF guard (code.dny.dev/ssrf, with the operator's allowlist, any
// port) accepts after resolution, refuses http:// unless AllowHTTP, never
// follows a redirect (the 3xx response is returned, to be classified
// redirect) and gives up after Timeout.
func NewClient(cfg GuardConfig) *http.Client {
	cfg = cfg.WithDefaults()
	guard := newGuardian(cfg.AllowedPrefixes)
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: guard.Safe}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		// Many sinks share one server (a team's Gotify, an Apprise API),
		// and their actors send at once: at most 64 connections to one
		// server, kept open between sends, so that a busy moment neither
		// dials (and handshakes) per send nor opens hundreds of
		// connections to a small self-hosted server; a send beyond them
		// waits for one (within the client's timeout).
		MaxIdleConns:           512,
		MaxIdleConnsPerHost:    64,
		MaxConnsPerHost:        64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	// The timeout is the guard's, not the client's (http.Client.Timeout):
	// given a RoundTripper of its own package's making, the client bounds
	// a request with a deadline on its context; given any other, such as
	// the guard, it also starts a goroutine, a timer and a cancel channel
	// per request, for transports that predate contexts (14 allocations
	// of a send's 112, BenchmarkGuardedClientPost).
	return &http.Client{
		Transport:     &schemeGuard{next: transport, allowHTTP: cfg.AllowHTTP, timeout: cfg.Timeout},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newGuardian is the SSRF guard with the operator's allowlist, any port.
func newGuardian(allowed []netip.Prefix) *ssrf.Guardian {
	var v4, v6 []netip.Prefix
	for _, p := range allowed {
		p = unmapPrefix(p)
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return ssrf.New(ssrf.WithAnyPort(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix into its IPv4 form, so
// "::ffff:10.0.0.0/104" allows what "10.0.0.0/8" does.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// schemeGuard refuses, on every request, a scheme the operator has not
// allowed: the https rule holds at send time even if a stored URL predates
// a change of the opt-in. It refuses a host spelt so that only other
// resolvers read it as an address or localhost (otherAddressSpelling) too,
// as ErrInvalidURL: blocked, not a network error retried.
//
// It also bounds the attempt, from dial to the end of the response body,
// by its timeout: the request goes on under a context with that deadline,
// ended when the body is closed.
type schemeGuard struct {
	next      *http.Transport
	allowHTTP bool
	timeout   time.Duration
}

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	err := checkScheme(req.URL.Scheme, g.allowHTTP)
	if err == nil && otherAddressSpelling(req.URL.Hostname()) {
		err = ErrInvalidURL
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeout(req.Context(), g.timeout)
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends an attempt's context when its response body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (g *schemeGuard) CloseIdleConnections() { g.next.CloseIdleConnections() }

func checkScheme(scheme string, allowHTTP bool) error {
	switch strings.ToLower(scheme) {
	case "https":
		return nil
	case "http":
		if allowHTTP {
			return nil
		}
	}
	return ErrInsecureScheme
}

// ParseBaseURL parses a sink's base URL: absolute, http or https, with a
// host, and without credentials, query or fragment. The error (ErrInvalidURL
// or ErrInsecureScheme) never repeats the URL. It does not apply the https
// rule; CheckURL does.
func ParseBaseURL(base string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return nil, ErrInvalidURL
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return nil, ErrInsecureScheme
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Hostname() == "" {
		return nil, ErrInvalidURL
	}
	if otherAddressSpelling(u.Hostname()) {
		return nil, ErrInvalidURL
	}
	return u, nil
}

// otherAddressSpelling reports a host that names an address, or this
// machine, in a spelling Go's resolver does not read as such although
// other resolvers (and Python's, which the Apprise server uses) do: another
// IPv4 spelling (otherIPv4Spelling), or an address or localhost written
// with a trailing dot ("127.0.0.1.", "LOCALHOST.", "foo.localhost.").
// Go's resolver sends such a name to DNS, so it would fail as a network
// error and be retried, while the server of an Apprise URL reads it as
// the loopback address; refused at once, it is final (blocked).
func otherAddressSpelling(host string) bool {
	if otherIPv4Spelling(host) {
		return true
	}
	bare := strings.TrimRight(host, ".")
	if bare == host || bare == "" {
		return false
	}
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(bare, "["), "]")); err == nil {
		return true
	}
	lower := strings.ToLower(bare)
	return otherIPv4Spelling(bare) || lower == "localhost" || strings.HasSuffix(lower, ".localhost")
}

// otherIPv4Spelling reports a host that some resolvers read as an IPv4
// address although it is not dotted decimal: decimal (2130706433), octal
// (0177.0.0.1), hexadecimal (0x7f.1) or shortened (127.1). Go's resolver
// refuses such a name, so it could only ever fail as a network error and
// be retried; refused at once, it is final (blocked) and the owner is told
// to write the address plainly.
func otherIPv4Spelling(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	for label := range strings.SplitSeq(strings.ToLower(host), ".") {
		digits := label
		if rest, ok := strings.CutPrefix(label, "0x"); ok {
			digits = rest
			if strings.Trim(digits, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if digits == "" || strings.Trim(digits, "0123456789") != "" {
			return false
		}
	}
	return true
}

// CheckURL is the save-time and send-time check of a sink's base URL: it
// must parse (ParseBaseURL) and be https unless allowHTTP. The error is
// ErrInvalidURL or ErrInsecureScheme (errors.Is), never repeating the URL.
func CheckURL(base string, allowHTTP bool) error {
	u, err := ParseBaseURL(base)
	if err != nil {
		return err
	}
	return checkScheme(u.Scheme, allowHTTP)
}

// Endpoint joins path elements onto a base URL (which may carry a path
// prefix) after checking it with ParseBaseURL. A trailing slash on the last
// element is kept.
func Endpoint(base string, elem ...string) (*url.URL, error) {
	u, err := ParseBaseURL(base)
	if err != nil {
		return nil, err
	}
	return u.JoinPath(elem...), nil
}

// RedactError rewrites a transport error so it cannot carry the request
// URL: a *url.Error becomes its Op and cause ("Post request: dial tcp
// 192.0.2.1:443: connect: connection refused"), and a cause whose text
// contains the URL is replaced by a copy with the URL cut out (still
// matching the same errors.Is targets). Any other error is returned as is.
func RedactError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	re := &redactedError{op: ue.Op, cause: ue.Err}
	if ue.Err == nil {
		return re
	}
	msg := ue.Err.Error()
	if scrubbed := scrubURL(msg, ue.URL); scrubbed != msg {
		re.cause = &scrubbedError{msg: scrubbed, orig: ue.Err}
	}
	return re
}

// scrubURL cuts the URL, with and without its query, out of msg.
func scrubURL(msg, raw string) string {
	forms := []string{raw}
	if u, err := url.Parse(raw); err == nil {
		bare := *u
		bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.User = "", false, "", nil
		forms = append(forms, u.Redacted(), bare.String())
	}
	for _, f := range forms {
		if len(f) > len("https://") {
			msg = strings.ReplaceAll(msg, f, "<url>")
		}
	}
	return msg
}

// redactedError is a *url.Error without its URL.
type redactedError struct {
	op    string
	cause error
}

func (e *redactedError) Error() string {
	if e.cause == nil {
		return strings.ToLower(e.op) + " request failed"
	}
	return strings.ToLower(e.op) + " request: " + e.cause.Error()
}

func (e *redactedError) Unwrap() error { return e.cause }

// Timeout keeps net.Error's Timeout visible through the redaction.
func (e *redactedError) Timeout() bool {
	var ne net.Error
	return errors.As(e.cause, &ne) && ne.Timeout()
}

// Temporary completes net.Error; it is always false.
func (e *redactedError) Temporary() bool { return false }

// scrubbedError is an error whose text contained the URL: it keeps the
// scrubbed text and answers errors.Is like the original, but does not
// unwrap to it.
type scrubbedError struct {
	msg  string
	orig error
}

func (e *scrubbedError) Error() string        { return e.msg }
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.orig, target) }
func (e *scrubbedError) Timeout() bool        { return isTimeout(e.orig) }
func (e *scrubbedError) Temporary() bool      { return false }

// DisplayURL is a base URL fit for a log line or a String method: scheme,
// host and path only. A URL that does not parse shows as "<invalid url>".
func DisplayURL(base string) string {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Host == "" {
		return "<invalid url>"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
