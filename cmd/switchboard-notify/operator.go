package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/notifytype"
)

// runGrantOperator is the grant-operator command: it gives the human with
// email the operator role (D26), which the instance-wide ops view,
// /metrics and an all-sinks status need.
func runGrantOperator(ctx context.Context, cfg config, email string, stdout io.Writer) error {
	pool, err := openDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer pool.Close()
	h, err := host.NewAccounts(pool).GrantOperator(ctx, email)
	if errors.Is(err, notifytype.ErrNotFound) {
		return fmt.Errorf("no human has the email %q", email)
	}
	if err != nil {
		return fmt.Errorf("error granting the operator role: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s (%s) is an operator: /ops shows every sink actor, and /metrics answers their token.\n", h.Name, h.Email)
	return err
}
