package main

import (
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/engine"
)

// env is a fake environment for loadConfig.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	require.NoError(t, err)
	require.Equal(t, DatabaseURLDefault, c.DatabaseURL)
	require.Equal(t, "127.0.0.1:8080", c.Listen)
	require.Equal(t, "http://127.0.0.1:8080", c.BaseURL)
	require.Nil(t, c.SecretKey)
	require.False(t, c.PushAllowHTTP)
	require.Empty(t, c.PrivateHosts)
	require.Nil(t, c.AppriseSchemesAllowed, "nil leaves the engine's default")
	require.Equal(t, engine.MaxSinksPerScopeDefault, c.MaxSinks)
	require.Equal(t, engine.BudgetPerHourMinDefault, c.BudgetPerHourMin)
	require.Equal(t, engine.BudgetPerHourMaxDefault, c.BudgetPerHourMax)
	require.Equal(t, engine.BudgetBurstMinDefault, c.BudgetBurstMin)
	require.Equal(t, engine.BudgetBurstMaxDefault, c.BudgetBurstMax)
	require.Equal(t, engine.ClaimTTLDefault, c.ClaimTTL)
	require.Equal(t, api.ServerConfig{ReadTimeout: api.ReadTimeoutDefault, WriteTimeout: api.WriteTimeoutDefault,
		IdleTimeout: api.IdleTimeoutDefault, MaxConns: api.MaxConnsDefault, MaxConnsPerClient: api.MaxConnsDefault / 8,
		PressureConns: api.MaxConnsDefault * 3 / 4, PressureIdleTimeout: api.PressureIdleTimeoutDefault,
		BodyMinRate: api.BodyMinRateDefault, BodyGrace: api.BodyGraceDefault}, c.HTTP)
	require.Equal(t, httpx.AuthFailuresPerMinuteDefault, c.AuthFailuresPerMinute)
	require.Equal(t, httpx.AuthFailuresBurstDefault, c.AuthFailuresBurst)
	require.Equal(t, LogFormatAuto, c.LogFormat)
	require.Equal(t, slog.LevelInfo, c.LogLevel)
}

func TestLoadConfigReadsEveryVariable(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("ab", 32)
	c, err := loadConfig(env(
		"DATABASE_URL", "postgres://app@db.internal:6543/notify?sslmode=require",
		"SWITCHBOARD_LISTEN", ":9090",
		"SWITCHBOARD_SECRET_KEY", key,
		"SWITCHBOARD_PUSH_ALLOW_HTTP", "true",
		"SWITCHBOARD_PRIVATE_HOSTS", " 10.0.0.0/8, 192.168.1.7 ,fd00::/8",
		"SWITCHBOARD_APPRISE_ALLOWED_SCHEMES", "TGRAM, json://",
		"SWITCHBOARD_MAX_SINKS", "25",
		"SWITCHBOARD_BUDGET_PER_HOUR_MIN", "2",
		"SWITCHBOARD_BUDGET_PER_HOUR_MAX", "600",
		"SWITCHBOARD_BUDGET_BURST_MIN", "3",
		"SWITCHBOARD_BUDGET_BURST_MAX", "50",
		"SWITCHBOARD_CLAIM_TTL", "5m",
		"SWITCHBOARD_HTTP_READ_TIMEOUT", "20s",
		"SWITCHBOARD_HTTP_WRITE_TIMEOUT", "45s",
		"SWITCHBOARD_HTTP_IDLE_TIMEOUT", "2m",
		"SWITCHBOARD_HTTP_MAX_CONNS", "64",
		"SWITCHBOARD_HTTP_MAX_CONNS_PER_CLIENT", "4",
		"SWITCHBOARD_HTTP_PRESSURE_CONNS", "32",
		"SWITCHBOARD_HTTP_PRESSURE_IDLE_TIMEOUT", "500ms",
		"SWITCHBOARD_HTTP_RESERVED_CONNS", "8",
		"SWITCHBOARD_HTTP_BODY_MIN_RATE", "4096",
		"SWITCHBOARD_HTTP_BODY_GRACE", "2s",
		"SWITCHBOARD_TRUSTED_PROXIES", "10.0.0.2, fd00::/64",
		"SWITCHBOARD_AUTH_FAILURES_PER_MINUTE", "3",
		"SWITCHBOARD_AUTH_FAILURES_BURST", "7",
		"SWITCHBOARD_LOG_FORMAT", "JSON",
		"SWITCHBOARD_LOG_LEVEL", "debug",
	))
	require.NoError(t, err)
	require.Equal(t, "postgres://app@db.internal:6543/notify?sslmode=require", c.DatabaseURL)
	require.Equal(t, ":9090", c.Listen)
	require.Equal(t, "http://localhost:9090", c.BaseURL, "an every-interface listen address links to localhost")
	wantKey, _ := hex.DecodeString(key)
	require.Equal(t, wantKey, c.SecretKey)
	require.True(t, c.PushAllowHTTP)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/8"),
	}, c.PrivateHosts)
	require.Equal(t, []string{"tgram", "json"}, c.AppriseSchemesAllowed)
	require.Equal(t, 25, c.MaxSinks)
	require.Equal(t, 2, c.BudgetPerHourMin)
	require.Equal(t, 600, c.BudgetPerHourMax)
	require.Equal(t, 3, c.BudgetBurstMin)
	require.Equal(t, 50, c.BudgetBurstMax)
	require.Equal(t, 5*time.Minute, c.ClaimTTL)
	require.Equal(t, api.ServerConfig{ReadTimeout: 20 * time.Second, WriteTimeout: 45 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxConns: 64, MaxConnsPerClient: 4, PressureConns: 32,
		PressureIdleTimeout: 500 * time.Millisecond, ReservedConns: 8, BodyMinRate: 4096, BodyGrace: 2 * time.Second,
		TrustedProxies: httpx.Proxies{netip.MustParsePrefix("10.0.0.2/32"), netip.MustParsePrefix("fd00::/64")}}, c.HTTP)
	require.Equal(t, 3, c.AuthFailuresPerMinute)
	require.Equal(t, 7, c.AuthFailuresBurst)
	require.Equal(t, LogFormatJSON, c.LogFormat)
	require.Equal(t, slog.LevelDebug, c.LogLevel)

	c, err = loadConfig(env("SWITCHBOARD_BASE_URL", "https://notify.example.com/", "SWITCHBOARD_LISTEN", "0.0.0.0:80"))
	require.NoError(t, err)
	require.Equal(t, "https://notify.example.com", c.BaseURL, "the trailing slash goes")
}

func TestLoadConfigSecretKeyForms(t *testing.T) {
	t.Parallel()
	raw := []byte("0123456789abcdef0123456789abcdef")
	for name, v := range map[string]string{
		"hex":       hex.EncodeToString(raw),
		"HEX":       strings.ToUpper(hex.EncodeToString(raw)),
		"base64":    base64.StdEncoding.EncodeToString(raw),
		"base64raw": base64.RawStdEncoding.EncodeToString(raw),
		"base64url": base64.RawURLEncoding.EncodeToString(raw),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := loadConfig(env("SWITCHBOARD_SECRET_KEY", v))
			require.NoError(t, err)
			require.Equal(t, raw, c.SecretKey)
		})
	}
}

// TestLoadConfigBadSecretKeyNeverEchoed plants canary keys of every bad
// shape and checks the error names the variable and the expected shape but
// holds no piece of the value.
func TestLoadConfigBadSecretKeyNeverEchoed(t *testing.T) {
	t.Parallel()
	for name, canary := range map[string]string{
		"short":          "Zq9xCANARYk3Wv",
		"hex-wrong-char": "g" + strings.Repeat("0a", 31) + "q",                          // 64 characters, not hex
		"hex-too-short":  strings.Repeat("c0ffee", 10),                                  // 60 hex characters
		"base64-16B":     base64.StdEncoding.EncodeToString([]byte("CANARY-16-bytes!")), // decodes, wrong length
		"base64-64B":     base64.StdEncoding.EncodeToString([]byte(strings.Repeat("CANARY!!", 8))),
		"spaces-inside":  "Zq9 CANARY Wv7 k3Pj",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(env("SWITCHBOARD_SECRET_KEY", canary))
			require.Error(t, err)
			msg := err.Error()
			require.Contains(t, msg, "SWITCHBOARD_SECRET_KEY")
			require.Contains(t, msg, "32 bytes")
			for i := 0; i+4 <= len(canary); i++ {
				require.NotContains(t, msg, canary[i:i+4], "the error repeats a piece of the key")
			}
			// Single characters of the key must not be quoted either (as
			// encoding/hex's "invalid byte: U+0067 'g'" would).
			require.NotContains(t, msg, "U+")
			require.NotContains(t, msg, "'")
		})
	}
}

func TestLoadConfigBadDatabaseURLNeverEchoesPassword(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(env("DATABASE_URL", "postgres://app:CanaryPassw0rd@db:notaport/x"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "DATABASE_URL")
	require.NotContains(t, err.Error(), "CanaryPassw0rd")
}

func TestLoadConfigRefusesBadValuesTogether(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(env(
		"SWITCHBOARD_LISTEN", "8080",
		"SWITCHBOARD_BASE_URL", "ftp://x",
		"SWITCHBOARD_PUSH_ALLOW_HTTP", "sometimes",
		"SWITCHBOARD_PRIVATE_HOSTS", "10.0.0.0/8,not-a-cidr",
		"SWITCHBOARD_APPRISE_ALLOWED_SCHEMES", "json,bad scheme",
		"SWITCHBOARD_MAX_SINKS", "0",
		"SWITCHBOARD_BUDGET_PER_HOUR_MIN", "-1",
		"SWITCHBOARD_BUDGET_PER_HOUR_MAX", "lots",
		"SWITCHBOARD_BUDGET_BURST_MIN", "40",
		"SWITCHBOARD_BUDGET_BURST_MAX", "20",
		"SWITCHBOARD_CLAIM_TTL", "2",
		"SWITCHBOARD_HTTP_READ_TIMEOUT", "-5s",
		"SWITCHBOARD_HTTP_WRITE_TIMEOUT", "1s",
		"SWITCHBOARD_HTTP_IDLE_TIMEOUT", "forever",
		"SWITCHBOARD_HTTP_MAX_CONNS", "0",
		"SWITCHBOARD_HTTP_RESERVED_CONNS", "-2",
		"SWITCHBOARD_HTTP_BODY_MIN_RATE", "0",
		"SWITCHBOARD_HTTP_BODY_GRACE", "soon",
		"SWITCHBOARD_TRUSTED_PROXIES", "10.0.0.1,proxy.internal",
		"SWITCHBOARD_LOG_FORMAT", "xml",
		"SWITCHBOARD_LOG_LEVEL", "loud",
	))
	require.Error(t, err)
	for _, want := range []string{
		`SWITCHBOARD_LISTEN: "8080" is not host:port`,
		`SWITCHBOARD_BASE_URL: "ftp://x"`,
		`SWITCHBOARD_PUSH_ALLOW_HTTP: "sometimes"`,
		`SWITCHBOARD_PRIVATE_HOSTS: "not-a-cidr"`,
		`SWITCHBOARD_APPRISE_ALLOWED_SCHEMES: "bad scheme"`,
		`SWITCHBOARD_MAX_SINKS: "0"`,
		`SWITCHBOARD_BUDGET_PER_HOUR_MIN: "-1" is not a positive integer`,
		`SWITCHBOARD_BUDGET_PER_HOUR_MAX: "lots" is not a positive integer`,
		`SWITCHBOARD_BUDGET_BURST_MIN: 40 is above SWITCHBOARD_BUDGET_BURST_MAX (20)`,
		`SWITCHBOARD_CLAIM_TTL: "2" is not a positive duration`,
		`SWITCHBOARD_HTTP_READ_TIMEOUT: "-5s" is not a positive duration`,
		`SWITCHBOARD_HTTP_WRITE_TIMEOUT: 1s is shorter than 15s`,
		`SWITCHBOARD_HTTP_IDLE_TIMEOUT: "forever" is not a positive duration`,
		`SWITCHBOARD_HTTP_MAX_CONNS: "0" is not a positive integer`,
		`SWITCHBOARD_HTTP_RESERVED_CONNS: "-2" is not a non-negative integer`,
		`SWITCHBOARD_HTTP_BODY_MIN_RATE: "0" is not a positive integer`,
		`SWITCHBOARD_HTTP_BODY_GRACE: "soon" is not a positive duration`,
		`SWITCHBOARD_TRUSTED_PROXIES: "proxy.internal" is not an address or a CIDR prefix`,
		`SWITCHBOARD_LOG_FORMAT: "xml"`,
		`SWITCHBOARD_LOG_LEVEL: "loud"`,
	} {
		require.Contains(t, err.Error(), want)
	}
}

// TestLoadConfigRefusesTheOldDenylist: the denylist variable is gone (the
// check is an allowlist, D23); an operator who still sets it is told to
// use the new one instead of silently losing their setting.
func TestLoadConfigRefusesTheOldDenylist(t *testing.T) {
	t.Parallel()
	_, err := loadConfig(env("SWITCHBOARD_APPRISE_DENIED_SCHEMES", "json,xml"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "SWITCHBOARD_APPRISE_DENIED_SCHEMES: is no longer read")
	require.Contains(t, err.Error(), "set SWITCHBOARD_APPRISE_ALLOWED_SCHEMES")
}
