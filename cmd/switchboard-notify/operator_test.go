package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hosttest"
)

// TestGrantOperator: the command gives an existing human the operator role
// (D26), refuses an unknown email, and needs exactly one argument.
func TestGrantOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := hosttest.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	accounts := host.NewAccounts(pool)
	h, err := accounts.CreateHuman(ctx, "Olga", "olga@example.net")
	require.NoError(t, err)
	other, err := accounts.CreateHuman(ctx, "Oskar", "oskar@example.net")
	require.NoError(t, err)

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"grant-operator", "olga@example.net"}, env("DATABASE_URL", dbURL), &out, io.Discard))
	require.Contains(t, out.String(), "olga@example.net")
	is, err := accounts.IsOperator(ctx, h.ID)
	require.NoError(t, err)
	require.True(t, is)
	is, err = accounts.IsOperator(ctx, other.ID)
	require.NoError(t, err)
	require.False(t, is, "only the named human")

	err = run(ctx, []string{"grant-operator", "nobody@example.net"}, env("DATABASE_URL", dbURL), io.Discard, io.Discard)
	require.ErrorContains(t, err, "no human has the email")
	require.ErrorIs(t, run(ctx, []string{"grant-operator"}, env(), io.Discard, io.Discard), errUsage)
	require.ErrorIs(t, run(ctx, []string{"status", "x"}, env(), io.Discard, io.Discard), errUsage)
}
