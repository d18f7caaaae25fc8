package main

import (
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
)

// Defaults of the environment (README.md lists every variable).
const (
	DatabaseURLDefault = "postgres://postgres@127.0.0.1:5432/switchboard?sslmode=disable"
	ListenDefault      = "127.0.0.1:8080"
)

// Log formats for SWITCHBOARD_LOG_FORMAT.
const (
	LogFormatAuto = "auto" // tint on a terminal, JSON otherwise
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// config is the binary's whole configuration, read from the environment in
// one place (loadConfig) so that every variable is parsed, defaulted and
// refused the same way.
type config struct {
	// DatabaseURL is DATABASE_URL. Defaults to DatabaseURLDefault. The
	// database is created when missing.
	DatabaseURL string

	// Listen is SWITCHBOARD_LISTEN, host:port. Defaults to ListenDefault.
	Listen string

	// BaseURL is SWITCHBOARD_BASE_URL, without a trailing slash. Defaults to
	// http://<Listen> (localhost when Listen names every interface).
	BaseURL string
	// BaseURLSet is true when SWITCHBOARD_BASE_URL was given; otherwise the
	// operator's commands print links for the address the server recorded
	// (linkBase).
	BaseURLSet bool

	// SecretKey is SWITCHBOARD_SECRET_KEY decoded: 32 bytes, or nil when
	// unset (then no secret can be stored).
	SecretKey []byte

	// PushAllowHTTP is SWITCHBOARD_PUSH_ALLOW_HTTP. Defaults to false.
	PushAllowHTTP bool

	// PrivateHosts is SWITCHBOARD_PRIVATE_HOSTS: prefixes the SSRF guard lets
	// deliveries reach although they are private. Defaults to none.
	PrivateHosts []netip.Prefix

	// Demo is SWITCHBOARD_DEMO: serve the demo (local receivers, a sink of
	// each kind, the dead-letter button at /demo). make run sets it.
	Demo bool

	// APIToken is SWITCHBOARD_API_TOKEN: the operator API token the status
	// command shows the running server's actors with.
	APIToken string

	// AppriseSchemesAllowed is SWITCHBOARD_APPRISE_ALLOWED_SCHEMES, the
	// Apprise scheme allowlist. Defaults to nil: the engine's default,
	// apprise.DefaultAllowedSchemes.
	AppriseSchemesAllowed []string

	// MaxSinks is SWITCHBOARD_MAX_SINKS, the ceiling of sinks per owner
	// scope. Defaults to engine.MaxSinksPerScopeDefault.
	MaxSinks int

	// BudgetPerHourMin and BudgetPerHourMax are SWITCHBOARD_BUDGET_PER_HOUR_MIN
	// and _MAX, the bounds of a sink's rate. Default to
	// engine.BudgetPerHourMinDefault and engine.BudgetPerHourMaxDefault (1, 120).
	BudgetPerHourMin, BudgetPerHourMax int

	// BudgetBurstMin and BudgetBurstMax are SWITCHBOARD_BUDGET_BURST_MIN and
	// _MAX, the bounds of a sink's burst. Default to
	// engine.BudgetBurstMinDefault and engine.BudgetBurstMaxDefault (1, 30).
	BudgetBurstMin, BudgetBurstMax int

	// ClaimTTL is SWITCHBOARD_CLAIM_TTL, how long a claimed row stays one
	// instance's. Defaults to engine.ClaimTTLDefault (2 minutes).
	ClaimTTL time.Duration

	// HTTP is the server's bounds: SWITCHBOARD_HTTP_READ_TIMEOUT,
	// SWITCHBOARD_HTTP_WRITE_TIMEOUT, SWITCHBOARD_HTTP_IDLE_TIMEOUT,
	// SWITCHBOARD_HTTP_MAX_CONNS, SWITCHBOARD_HTTP_MAX_CONNS_PER_CLIENT,
	// SWITCHBOARD_HTTP_PRESSURE_CONNS,
	// SWITCHBOARD_HTTP_PRESSURE_IDLE_TIMEOUT,
	// SWITCHBOARD_HTTP_RESERVED_CONNS, SWITCHBOARD_HTTP_BODY_MIN_RATE,
	// SWITCHBOARD_HTTP_BODY_GRACE and SWITCHBOARD_TRUSTED_PROXIES. Default
	// to api's defaults (30 s, 30 s, 60 s, 1000, an eighth and three
	// quarters of the max conns, 1 s, a tenth of the max conns, 1024
	// bytes a second, 5 s, no proxies).
	HTTP api.ServerConfig

	// AuthFailuresPerMinute and AuthFailuresBurst are
	// SWITCHBOARD_AUTH_FAILURES_PER_MINUTE and
	// SWITCHBOARD_AUTH_FAILURES_BURST: the failed authentications a client
	// address may make (httpx.AuthFailures). Default to 10 a minute, 20 in
	// a row.
	AuthFailuresPerMinute, AuthFailuresBurst int

	// LogFormat is SWITCHBOARD_LOG_FORMAT: auto, text or json. Defaults to
	// auto.
	LogFormat string

	// LogLevel is SWITCHBOARD_LOG_LEVEL (debug, info, warn, error). Defaults
	// to info.
	LogLevel slog.Level
}

var schemeRE = regexp.MustCompile(`^[a-z0-9]{1,32}$`)

// Lower bounds of settings below which the server cannot work.
const (
	// claimTTLMin leaves an attempt (10 s) and its record time inside the
	// claim.
	claimTTLMin = 15 * time.Second
	// writeTimeoutMin leaves a send test (10 s) time to answer.
	writeTimeoutMin = 15 * time.Second
)

// loadConfig reads the configuration through lookup (os.LookupEnv in the
// binary). It reports every bad variable at once. An error names the
// variable and what it expects; it never repeats a secret's value.
func loadConfig(lookup func(string) (string, bool)) (config, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}

	c := config{
		DatabaseURL: cmp.Or(get("DATABASE_URL"), DatabaseURLDefault),
		Listen:      cmp.Or(get("SWITCHBOARD_LISTEN"), ListenDefault),
		LogFormat:   cmp.Or(strings.ToLower(get("SWITCHBOARD_LOG_FORMAT")), LogFormatAuto),
	}

	// DATABASE_URL may carry a password: its parse error is not repeated.
	if pc, err := pgx.ParseConfig(c.DatabaseURL); err != nil {
		bad("DATABASE_URL", "not a PostgreSQL connection string (want postgres://user@host:port/database?sslmode=disable)")
	} else if pc.Database == "" {
		bad("DATABASE_URL", "names no database")
	}

	listenHost, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		bad("SWITCHBOARD_LISTEN", "%q is not host:port", c.Listen)
	}

	if v := get("SWITCHBOARD_BASE_URL"); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("SWITCHBOARD_BASE_URL", "%q is not an http(s) URL like https://notify.example.com", v)
		}
		c.BaseURL = strings.TrimRight(v, "/")
		c.BaseURLSet = true
	} else {
		host := listenHost
		if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
			host = "localhost"
		}
		_, port, _ := net.SplitHostPort(c.Listen)
		c.BaseURL = "http://" + net.JoinHostPort(host, port)
	}

	if v, ok := lookup("SWITCHBOARD_SECRET_KEY"); ok && strings.TrimSpace(v) != "" {
		key, err := parseSecretKey(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, err)
		}
		c.SecretKey = key
	}

	if v := get("SWITCHBOARD_PUSH_ALLOW_HTTP"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("SWITCHBOARD_PUSH_ALLOW_HTTP", "%q is not a boolean (true or false)", v)
		}
		c.PushAllowHTTP = b
	}

	for _, f := range splitList(get("SWITCHBOARD_PRIVATE_HOSTS")) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				bad("SWITCHBOARD_PRIVATE_HOSTS", "%q is not a CIDR prefix like 10.0.0.0/8", f)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.PrivateHosts = append(c.PrivateHosts, p.Masked())
	}

	c.APIToken = get("SWITCHBOARD_API_TOKEN")
	if v := get("SWITCHBOARD_DEMO"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("SWITCHBOARD_DEMO", "%q is not a boolean", v)
		}
		c.Demo = b
	}
	if get("SWITCHBOARD_APPRISE_DENIED_SCHEMES") != "" {
		bad("SWITCHBOARD_APPRISE_DENIED_SCHEMES", "is no longer read: the Apprise scheme check is an allowlist now; "+
			"set SWITCHBOARD_APPRISE_ALLOWED_SCHEMES to the schemes to allow (unset, the default allows Apprise's "+
			"notification services except json, jsons, xml, xmls, form, forms and the local-system ones) and unset this one")
	}
	if v := get("SWITCHBOARD_APPRISE_ALLOWED_SCHEMES"); v != "" {
		c.AppriseSchemesAllowed = []string{}
		for _, f := range splitList(strings.ToLower(v)) {
			f = strings.TrimSuffix(f, "://")
			if !schemeRE.MatchString(f) {
				bad("SWITCHBOARD_APPRISE_ALLOWED_SCHEMES", "%q is not an Apprise scheme (letters and digits)", f)
				continue
			}
			c.AppriseSchemesAllowed = append(c.AppriseSchemesAllowed, f)
		}
	}

	positive := func(name string, def int) int {
		v := get(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad(name, "%q is not a positive integer", v)
		}
		return n
	}
	duration := func(name string, def time.Duration) time.Duration {
		v := get(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(name, "%q is not a positive duration like 30s or 2m", v)
		}
		return d
	}
	c.MaxSinks = positive("SWITCHBOARD_MAX_SINKS", engine.MaxSinksPerScopeDefault)
	c.BudgetPerHourMin = positive("SWITCHBOARD_BUDGET_PER_HOUR_MIN", engine.BudgetPerHourMinDefault)
	c.BudgetPerHourMax = positive("SWITCHBOARD_BUDGET_PER_HOUR_MAX", engine.BudgetPerHourMaxDefault)
	c.BudgetBurstMin = positive("SWITCHBOARD_BUDGET_BURST_MIN", engine.BudgetBurstMinDefault)
	c.BudgetBurstMax = positive("SWITCHBOARD_BUDGET_BURST_MAX", engine.BudgetBurstMaxDefault)
	if c.BudgetPerHourMin > c.BudgetPerHourMax {
		bad("SWITCHBOARD_BUDGET_PER_HOUR_MIN", "%d is above SWITCHBOARD_BUDGET_PER_HOUR_MAX (%d)", c.BudgetPerHourMin, c.BudgetPerHourMax)
	}
	if c.BudgetBurstMin > c.BudgetBurstMax {
		bad("SWITCHBOARD_BUDGET_BURST_MIN", "%d is above SWITCHBOARD_BUDGET_BURST_MAX (%d)", c.BudgetBurstMin, c.BudgetBurstMax)
	}
	c.ClaimTTL = duration("SWITCHBOARD_CLAIM_TTL", engine.ClaimTTLDefault)
	if c.ClaimTTL > 0 && c.ClaimTTL < claimTTLMin {
		bad("SWITCHBOARD_CLAIM_TTL", "%s is shorter than %s: an attempt (10 s) must finish inside its claim", c.ClaimTTL, claimTTLMin)
	}
	c.HTTP = api.ServerConfig{
		ReadTimeout:  duration("SWITCHBOARD_HTTP_READ_TIMEOUT", api.ReadTimeoutDefault),
		WriteTimeout: duration("SWITCHBOARD_HTTP_WRITE_TIMEOUT", api.WriteTimeoutDefault),
		IdleTimeout:  duration("SWITCHBOARD_HTTP_IDLE_TIMEOUT", api.IdleTimeoutDefault),
		MaxConns:     positive("SWITCHBOARD_HTTP_MAX_CONNS", api.MaxConnsDefault),
	}
	c.HTTP.MaxConnsPerClient = positive("SWITCHBOARD_HTTP_MAX_CONNS_PER_CLIENT", max(1, c.HTTP.MaxConns/8))
	c.HTTP.PressureConns = positive("SWITCHBOARD_HTTP_PRESSURE_CONNS", max(1, c.HTTP.MaxConns*3/4))
	c.HTTP.PressureIdleTimeout = duration("SWITCHBOARD_HTTP_PRESSURE_IDLE_TIMEOUT", api.PressureIdleTimeoutDefault)
	if c.HTTP.MaxConnsPerClient > c.HTTP.MaxConns {
		bad("SWITCHBOARD_HTTP_MAX_CONNS_PER_CLIENT", "%d is above SWITCHBOARD_HTTP_MAX_CONNS (%d): one client could take every connection",
			c.HTTP.MaxConnsPerClient, c.HTTP.MaxConns)
	}
	if c.HTTP.PressureConns > c.HTTP.MaxConns {
		bad("SWITCHBOARD_HTTP_PRESSURE_CONNS", "%d is above SWITCHBOARD_HTTP_MAX_CONNS (%d)", c.HTTP.PressureConns, c.HTTP.MaxConns)
	}
	if v := get("SWITCHBOARD_HTTP_RESERVED_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			bad("SWITCHBOARD_HTTP_RESERVED_CONNS", "%q is not a non-negative integer", v)
		case n >= c.HTTP.MaxConns:
			bad("SWITCHBOARD_HTTP_RESERVED_CONNS", "%d is not below SWITCHBOARD_HTTP_MAX_CONNS (%d): no connection would be left for a client without a credential",
				n, c.HTTP.MaxConns)
		case n == 0:
			c.HTTP.ReservedConns = -1 // none
		default:
			c.HTTP.ReservedConns = n
		}
	}
	c.HTTP.BodyMinRate = positive("SWITCHBOARD_HTTP_BODY_MIN_RATE", api.BodyMinRateDefault)
	c.HTTP.BodyGrace = duration("SWITCHBOARD_HTTP_BODY_GRACE", api.BodyGraceDefault)
	for _, f := range splitList(get("SWITCHBOARD_TRUSTED_PROXIES")) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				bad("SWITCHBOARD_TRUSTED_PROXIES", "%q is not an address or a CIDR prefix like 10.0.0.0/8", f)
				continue
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		c.HTTP.TrustedProxies = append(c.HTTP.TrustedProxies, p.Masked())
	}
	c.AuthFailuresPerMinute = positive("SWITCHBOARD_AUTH_FAILURES_PER_MINUTE", httpx.AuthFailuresPerMinuteDefault)
	c.AuthFailuresBurst = positive("SWITCHBOARD_AUTH_FAILURES_BURST", httpx.AuthFailuresBurstDefault)
	if c.HTTP.WriteTimeout > 0 && c.HTTP.WriteTimeout < writeTimeoutMin {
		bad("SWITCHBOARD_HTTP_WRITE_TIMEOUT", "%s is shorter than %s: a send test waits up to 10 s for its sink", c.HTTP.WriteTimeout, writeTimeoutMin)
	}

	switch c.LogFormat {
	case LogFormatAuto, LogFormatText, LogFormatJSON:
	default:
		bad("SWITCHBOARD_LOG_FORMAT", "%q is not auto, text or json", c.LogFormat)
	}

	if v := get("SWITCHBOARD_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			bad("SWITCHBOARD_LOG_LEVEL", "%q is not debug, info, warn or error", v)
		}
	}

	if err := errors.Join(errs...); err != nil {
		return config{}, fmt.Errorf("error in the environment:\n%w", err)
	}
	return c, nil
}

// parseSecretKey reads the operator key: 64 hex characters, or standard or
// URL base64 (padded or not) of 32 bytes. Its errors say only the shape
// expected and the length seen, never the value or a character of it.
func parseSecretKey(v string) ([]byte, error) {
	if len(v) == 64 {
		if b, err := hex.DecodeString(v); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			if len(b) == 32 {
				return b, nil
			}
			return nil, fmt.Errorf("SWITCHBOARD_SECRET_KEY: decodes to %d bytes, want 32 (64 hex characters or base64 of 32 bytes; make one with: openssl rand -hex 32)", len(b))
		}
	}
	return nil, fmt.Errorf("SWITCHBOARD_SECRET_KEY: a %d-character value that is neither 64 hex characters nor base64 of 32 bytes (make one with: openssl rand -hex 32)", len(v))
}

// splitList splits a comma-separated list, trimming blanks.
func splitList(v string) []string {
	var out []string
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// redactedDatabase names the database server and database without user or
// password, for logs.
func redactedDatabase(databaseURL string) string {
	pc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return "(unparsable DATABASE_URL)"
	}
	return fmt.Sprintf("%s:%d/%s", pc.Host, pc.Port, pc.Database)
}
