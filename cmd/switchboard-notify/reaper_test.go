package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
)

// TestServeReapsExpiredLeases runs the serve command over a todo whose
// agent vanished: the binary's own reaper dead-letters it at its cap
// (REQ-6's lease expiry), with no test calling ReapExpired.
func TestServeReapsExpiredLeases(t *testing.T) {
	t.Parallel()
	dbURL := hosttest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	f := hosttest.NewFactory(t, pool)
	human := f.Human("")
	queue := f.Queue(hostid.Human(human), "forge")
	endpoint := f.Endpoint(hosttest.EndpointOpts{Human: human})
	todo := f.Todo(hosttest.TodoOpts{Queue: queue, AttemptCap: 1})
	eng, err := engine.New(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links()})
	require.NoError(t, err)
	claimed, ok, err := host.NewTodos(pool, eng, nil).Claim(ctx, endpoint, queue)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, todo, claimed.ID)
	// The agent vanished: its lease ran out.
	_, err = pool.Exec(ctx, `UPDATE todos SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, todo)
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stderr := newLineSink()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve"}, env(
			"DATABASE_URL", dbURL,
			"SWITCHBOARD_LISTEN", "127.0.0.1:0",
			"SWITCHBOARD_LOG_FORMAT", "json",
		), newLineSink(), stderr)
	}()
	var seen []string
	stderr.waitFor(t, &seen, func(l string) string {
		if strings.Contains(l, `"msg":"reaped expired leases"`) {
			return l
		}
		return ""
	})
	// Stop only once serve has started in full.
	if !listeningRE.MatchString(strings.Join(seen, "\n")) {
		stderr.waitFor(t, &seen, func(l string) string { return listeningRE.FindString(l) })
	}
	var state, reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, dead_reason FROM todos WHERE id = $1`, todo).Scan(&state, &reason))
	require.Equal(t, "dead", state)
	require.Equal(t, string(host.CauseLeaseExpired), reason)
	cancel()
	require.NoError(t, <-done)
}
