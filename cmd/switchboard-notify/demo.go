package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/host"
)

// The demo human that `demo` and a first `serve` create.
const (
	demoName  = "Demo Human"
	demoEmail = "demo@switchboard.local"
)

// runDemo is the demo command: it ensures the demo human and prints fresh
// credentials for it.
func runDemo(ctx context.Context, cfg config, stdout io.Writer) error {
	// Logs go nowhere here: the command's output is the credentials.
	pool, err := openDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer pool.Close()
	base, err := linkBase(ctx, cfg, pool)
	if err != nil {
		return err
	}
	return demoCredentials(ctx, pool, base, stdout)
}

// demoCredentials ensures the demo human and writes a one-time login link and a new
// operator API token for it to w. Credentials go to w (stdout), never to a
// log: they are shown this once and stored only as hashes.
func demoCredentials(ctx context.Context, pool *pgxpool.Pool, baseURL string, w io.Writer) error {
	accounts := host.NewAccounts(pool)
	h, created, err := accounts.EnsureHuman(ctx, demoName, demoEmail)
	if err != nil {
		return fmt.Errorf("error creating the demo human: %w", err)
	}
	link, expires, err := accounts.MintLoginLink(ctx, h.ID)
	if err != nil {
		return fmt.Errorf("error minting a login link: %w", err)
	}
	token, err := accounts.MintAPIToken(ctx, h.ID)
	if err != nil {
		return fmt.Errorf("error minting an operator token: %w", err)
	}
	state := "exists"
	if created {
		state = "created"
	}
	_, err = fmt.Fprintf(w, `
Demo human %s (id %d) %s.
  Web UI, one-time login link (valid until %s):
    %s/login/%s
  Operator API token (shown once; send as "Authorization: Bearer <token>"):
    %s

`, h.Email, h.ID, state, expires.Local().Format("15:04 MST"), baseURL, link.Reveal(), token.Reveal())
	return err
}
