package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// runStatus is the status command: the per-sink actor table for ops.
//
// TODO(lead): the engine has no Status() yet. Actor status lives in the
// memory of each serving instance, so once engine.Status and the ops JSON
// endpoint exist, this command should fetch <SWITCHBOARD_BASE_URL>/ops/…
// (or call engine.Status in-process) and print one row per sink: state,
// tokens, held, in flight, next wake, last error class, restarts.
func runStatus(ctx context.Context, cfg config, stdout io.Writer) error {
	pool, err := openDatabase(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintln(stdout, "no actors")
	return nil
}
