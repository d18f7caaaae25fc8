package main

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
)

// TestAdminCommands runs the operator's admin commands against a real
// database: create a human and a team, add the human as admin, list both,
// mint a token and a login link that work.
func TestAdminCommands(t *testing.T) {
	t.Parallel()
	dbURL := hosttest.URL(t)
	ctx := context.Background()
	vars := env("DATABASE_URL", dbURL, "SWITCHBOARD_BASE_URL", "https://notify.example.net", "SWITCHBOARD_LOG_FORMAT", "json")
	cmd := func(args ...string) string {
		t.Helper()
		var out strings.Builder
		require.NoError(t, run(ctx, args, vars, &out, io.Discard), "%v", args)
		return out.String()
	}

	require.Contains(t, cmd("create-human", "ada@example.net", "Ada", "Lovelace"), "Created human ada@example.net")
	require.Contains(t, cmd("create-team", "Night", "Shift"), "Created team Night Shift")
	require.Contains(t, cmd("add-member", "Night Shift", "ada@example.net", "admin"), "ada@example.net is now admin of team Night Shift.")

	humans := cmd("humans")
	require.Regexp(t, `(?m)^\d+\s+ada@example.net\s+Ada Lovelace\s+Night Shift \(admin\)$`, humans)
	teams := cmd("teams")
	require.Regexp(t, `(?m)^\d+\s+Night Shift\s+team:\d+\s+ada@example.net \(admin\)$`, teams)

	out := cmd("mint-token", "ada@example.net")
	token := regexp.MustCompile(`sbo_\S+`).FindString(out)
	require.NotEmpty(t, token, out)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	accounts := host.NewAccounts(pool)
	h, err := accounts.HumanByAPIToken(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "ada@example.net", h.Email)

	out = cmd("login-link", "ada@example.net")
	link := regexp.MustCompile(`https://notify.example.net/login/(sbl_\S+)`).FindStringSubmatch(out)
	require.NotNil(t, link, out)
	// When it stops working, with its zone (issue 25): "16:28 UTC", not
	// a bare "16:28:17".
	require.Regexp(t, `\(valid until \d\d:\d\d (?:[A-Z]{2,5}|[+-]\d{4})\):`, out)
	h, err = accounts.UseLoginLink(ctx, link[1])
	require.NoError(t, err)
	require.Equal(t, "ada@example.net", h.Email)

	// Refusals say what is wrong and change nothing.
	var out2 strings.Builder
	require.Error(t, run(ctx, []string{"add-member", "Night Shift", "ada@example.net", "boss"}, vars, &out2, io.Discard))
	require.Error(t, run(ctx, []string{"add-member", "No Such Team", "ada@example.net", "member"}, vars, &out2, io.Discard))
	require.Error(t, run(ctx, []string{"mint-token", "nobody@example.net"}, vars, &out2, io.Discard))
	require.Error(t, run(ctx, []string{"create-human", "ada@example.net", "Again"}, vars, &out2, io.Discard), "email taken")
	err = run(ctx, []string{"mint-token"}, vars, &out2, io.Discard)
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, cmd("humans"), "Night Shift (admin)")
}

// TestEveryCommandHasHelpWithAnExample: --help, -h and help <command>
// print the command's synopsis and an example, and do nothing else (no
// configuration is read).
func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			var out strings.Builder
			require.NoError(t, run(context.Background(), args, env("DATABASE_URL", "::not a url::"), &out, io.Discard), "%v", args)
			require.True(t, strings.HasPrefix(out.String(), "usage: switchboard-notify "+c.name), "%v: %s", args, out.String())
			require.Contains(t, out.String(), "\nExample:\n  ", "%v", args)
			require.Contains(t, out.String()[strings.Index(out.String(), "Example:"):], "switchboard-notify", "%v", args)
		}
	}
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"--help"}, env(), &out, io.Discard))
	for _, c := range commands {
		require.Contains(t, out.String(), "\n  "+c.name, "the usage lists %s", c.name)
	}
}
