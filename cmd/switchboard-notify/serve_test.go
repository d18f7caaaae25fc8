package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
)

func TestHealthz(t *testing.T) {
	t.Parallel()

	get := func(t *testing.T, db pinger) (int, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		healthHandler(db).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}

	t.Run("DatabaseAnswers", func(t *testing.T) {
		t.Parallel()
		code, body := get(t, hosttest.New(t))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok\n", body)
	})

	t.Run("DatabaseGone", func(t *testing.T) {
		t.Parallel()
		pool, err := pgxpool.New(context.Background(), hosttest.URL(t))
		require.NoError(t, err)
		pool.Close()
		code, body := get(t, pool)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, "database unavailable\n", body)
	})
}

// lineSink is an io.Writer that hands each complete line to a channel, so a
// test can wait for a line without sleeping.
type lineSink struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func newLineSink() *lineSink { return &lineSink{lines: make(chan string, 4096)} }

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		s.lines <- string(s.buf[:i])
		s.buf = s.buf[i+1:]
	}
}

// waitFor returns the first line for which match returns a non-empty
// string, keeping every line read in seen.
func (s *lineSink) waitFor(t *testing.T, seen *[]string, match func(string) string) string {
	t.Helper()
	timeout := time.After(30 * time.Second) // a bound for a broken server, not a synchronisation
	for {
		select {
		case line := <-s.lines:
			*seen = append(*seen, line)
			if m := match(line); m != "" {
				return m
			}
		case <-timeout:
			t.Fatalf("no matching line; saw:\n%s", strings.Join(*seen, "\n"))
		}
	}
}

// rest returns the lines not read yet.
func (s *lineSink) rest() []string {
	var out []string
	for {
		select {
		case line := <-s.lines:
			out = append(out, line)
		default:
			return out
		}
	}
}

var listeningRE = regexp.MustCompile(`"msg":"listening on (http://[^"]+)"`)

// TestServe runs the serve command on a fresh database: it prints the demo
// credentials once, logs where it listens, answers /healthz, and stops
// cleanly when its context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	dbURL := hosttest.URL(t)

	start := func(t *testing.T) (stdout, stderr *lineSink, stop func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		stdout, stderr = newLineSink(), newLineSink()
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve"}, env(
				"DATABASE_URL", dbURL,
				"SWITCHBOARD_LISTEN", "127.0.0.1:0",
				"SWITCHBOARD_BASE_URL", "http://notify.test",
				"SWITCHBOARD_LOG_FORMAT", "json",
			), stdout, stderr)
		}()
		t.Cleanup(cancel)
		return stdout, stderr, func() error { cancel(); return <-done }
	}

	stdout, stderr, stop := start(t)
	var outLines, logLines []string
	link := stdout.waitFor(t, &outLines, func(l string) string {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "http://notify.test/login/sbl_") {
			return strings.TrimPrefix(l, "http://notify.test/login/")
		}
		return ""
	})
	token := stdout.waitFor(t, &outLines, func(l string) string {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "sbo_") {
			return l
		}
		return ""
	})
	addr := stderr.waitFor(t, &logLines, func(l string) string {
		if m := listeningRE.FindStringSubmatch(l); m != nil {
			return m[1]
		}
		return ""
	})

	resp, err := http.Get(addr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok\n", string(body))

	// The printed credentials are real.
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	accounts := host.NewAccounts(pool)
	h, err := accounts.HumanByAPIToken(context.Background(), token)
	require.NoError(t, err)
	require.Equal(t, demoEmail, h.Email)
	_, err = accounts.UseLoginLink(context.Background(), link)
	require.NoError(t, err)

	// The operator's commands, run from a shell without the server's
	// SWITCHBOARD_BASE_URL, print links for the address it answers at.
	bare := env("DATABASE_URL", dbURL, "SWITCHBOARD_LOG_FORMAT", "json")
	for _, args := range [][]string{{"login-link", demoEmail}, {"demo"}} {
		var out strings.Builder
		require.NoError(t, run(context.Background(), args, bare, &out, io.Discard), "%v", args)
		require.Regexp(t, `(?m)^\s*http://notify\.test/login/sbl_\S+$`, out.String(), "%v", args)
		require.Regexp(t, `valid until \d\d:\d\d (?:[A-Z]{2,5}|[+-]\d{4})\):`, out.String(), "%v: the expiry has its zone", args)
	}
	// Their own setting wins.
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"login-link", demoEmail},
		env("DATABASE_URL", dbURL, "SWITCHBOARD_BASE_URL", "https://other.example", "SWITCHBOARD_LOG_FORMAT", "json"), &out, io.Discard))
	require.Regexp(t, `(?m)^https://other\.example/login/sbl_\S+$`, out.String())

	require.NoError(t, stop())
	logLines = append(logLines, stderr.rest()...)
	require.NotEmpty(t, logLines)
	for _, line := range logLines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a log line is JSON: %s", line)
		require.NotContains(t, line, token, "a credential reached the log")
		require.NotContains(t, line, link, "a credential reached the log")
	}
	require.Contains(t, strings.Join(logLines, "\n"), `"msg":"stopped"`)

	// A second start on a database with humans prints no credentials.
	stdout, stderr, stop = start(t)
	logLines = nil
	stderr.waitFor(t, &logLines, func(l string) string { return listeningRE.FindString(l) })
	require.NoError(t, stop())
	require.Empty(t, stdout.rest())
}

// TestMigrateCreatesDatabase points the migrate command at a database that
// does not exist yet.
func TestMigrateCreatesDatabase(t *testing.T) {
	t.Parallel()
	// The server storetest uses, as its superuser (pgtestdb's own role may
	// not create databases).
	server := url.URL{
		Scheme:   "postgres",
		User:     url.User(cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGUSER"), "postgres")),
		Host:     net.JoinHostPort(cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGHOST"), "127.0.0.1"), cmp.Or(os.Getenv("SWITCHBOARD_TEST_PGPORT"), "5432")),
		RawQuery: "sslmode=disable",
	}
	name := fmt.Sprintf("sbn_migrate_test_%d", time.Now().UnixNano())
	fresh, admin := server, server
	fresh.Path, admin.Path = "/"+name, "/postgres"

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin.String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	t.Cleanup(func() {
		_, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
		require.NoError(t, err)
	})

	var stdout strings.Builder
	require.NoError(t, run(ctx, []string{"migrate"}, env("DATABASE_URL", fresh.String(), "SWITCHBOARD_LOG_FORMAT", "json"), &stdout, io.Discard))
	require.Contains(t, stdout.String(), "engine at migration")

	// Twice is fine.
	require.NoError(t, run(ctx, []string{"migrate"}, env("DATABASE_URL", fresh.String(), "SWITCHBOARD_LOG_FORMAT", "json"), io.Discard, io.Discard))

	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n))
	require.Equal(t, 1, n)
}

func TestRunRefusesUnknownCommand(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"serv"}, env(), io.Discard, io.Discard)
	require.ErrorIs(t, err, errUsage)

	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"version"}, env(), &out, io.Discard))
	require.True(t, strings.HasPrefix(out.String(), "switchboard-notify "))
}
