package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
)

// The admin commands act on the database directly (DATABASE_URL): they
// are the operator's, run where the binary runs, and need no server.
// Credentials they mint go to stdout, never to a log.

// withAccounts opens the database as serve does (created if missing,
// migrated) and runs fn with the accounts over it.
func withAccounts(ctx context.Context, cfg config, fn func(*host.Accounts, *pgxpool.Pool) error) error {
	pool, err := openDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(host.NewAccounts(pool), pool)
}

func runHumans(ctx context.Context, cfg config, _ *slog.Logger, _ []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		humans, err := a.ListHumans(ctx)
		if err != nil {
			return fmt.Errorf("error listing humans: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tEMAIL\tNAME\tTEAMS")
		for _, h := range humans {
			teams := make([]string, len(h.Teams))
			for i, m := range h.Teams {
				teams[i] = m.Team.Name + " (" + m.Role + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", h.Human.ID, h.Human.Email, h.Human.Name, orDash(strings.Join(teams, ", ")))
		}
		return tw.Flush()
	})
}

func runTeams(ctx context.Context, cfg config, _ *slog.Logger, _ []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		teams, err := a.ListTeams(ctx)
		if err != nil {
			return fmt.Errorf("error listing teams: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tMEMBERS")
		for _, t := range teams {
			members := make([]string, len(t.Members))
			for i, m := range t.Members {
				members[i] = m.Email + " (" + m.Role + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\tteam:%d\t%s\n", t.Team.ID, t.Team.Name, t.Team.ID, orDash(strings.Join(members, ", ")))
		}
		return tw.Flush()
	})
}

func runCreateHuman(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
	email, name := args[0], strings.Join(args[1:], " ")
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		h, err := a.CreateHuman(ctx, name, email)
		if err != nil {
			return fmt.Errorf("error creating human: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "Created human %s (id %d, scope human:%d).\nSign them in with: switchboard-notify login-link %s\n",
			h.Email, h.ID, h.ID, h.Email)
		return err
	})
}

func runCreateTeam(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		t, err := a.CreateTeam(ctx, strings.Join(args, " "))
		if err != nil {
			return fmt.Errorf("error creating team: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "Created team %s (id %d, scope team:%d).\nAdd members with: switchboard-notify add-member %s <email> owner|admin|member\n",
			t.Name, t.ID, t.ID, strconv.Quote(t.Name))
		return err
	})
}

func runAddMember(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		team, err := a.FindTeam(ctx, args[0])
		if err != nil {
			return fmt.Errorf("error finding team %q: %w", args[0], err)
		}
		h, err := a.HumanByEmail(ctx, args[1])
		if err != nil {
			return fmt.Errorf("error finding human %q: %w", args[1], err)
		}
		if err := a.AddMember(ctx, team.ID, h.ID, engine.Role(strings.ToLower(args[2]))); err != nil {
			return fmt.Errorf("error adding member: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s is now %s of team %s.\n", h.Email, strings.ToLower(args[2]), team.Name)
		return err
	})
}

func runMintToken(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, _ *pgxpool.Pool) error {
		h, err := a.HumanByEmail(ctx, args[0])
		if err != nil {
			return fmt.Errorf("error finding human %q: %w", args[0], err)
		}
		tok, err := a.MintAPIToken(ctx, h.ID)
		if err != nil {
			return fmt.Errorf("error minting an operator token: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "Operator API token for %s (shown once; send as \"Authorization: Bearer <token>\"):\n%s\n",
			h.Email, tok.Reveal())
		return err
	})
}

// linkBase is the base URL the operator's commands print links for: the
// command's own SWITCHBOARD_BASE_URL when set, else the one a serving
// process recorded last (its SWITCHBOARD_BASE_URL, or its listen address),
// else the default address.
func linkBase(ctx context.Context, cfg config, pool *pgxpool.Pool) (string, error) {
	if cfg.BaseURLSet {
		return cfg.BaseURL, nil
	}
	served, err := hoststore.LastBaseURL(ctx, pool)
	if err != nil || served == "" {
		return cfg.BaseURL, err
	}
	return served, nil
}

func runLoginLink(ctx context.Context, cfg config, _ *slog.Logger, args []string, stdout io.Writer) error {
	return withAccounts(ctx, cfg, func(a *host.Accounts, pool *pgxpool.Pool) error {
		base, err := linkBase(ctx, cfg, pool)
		if err != nil {
			return err
		}
		h, err := a.HumanByEmail(ctx, args[0])
		if err != nil {
			return fmt.Errorf("error finding human %q: %w", args[0], err)
		}
		link, expires, err := a.MintLoginLink(ctx, h.ID)
		if err != nil {
			return fmt.Errorf("error minting a login link: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "One-time login link for %s (valid until %s):\n%s/login/%s\n",
			h.Email, expires.Local().Format("15:04 MST"), strings.TrimRight(base, "/"), link.Reveal())
		return err
	})
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
