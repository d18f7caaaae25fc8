package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard/notify/host"
)

// reapInterval is how often each instance looks for todos whose lease
// expired. A lease is at least a second; a few seconds late is within what
// an owner notices.
const reapInterval = 5 * time.Second

// reaper processes expired todo leases (host.Todos.ReapExpired) at start
// and every reapInterval, on every instance: the todos are taken FOR
// UPDATE SKIP LOCKED, so instances share the work and each todo is reaped
// once. It is a suture service: an error is logged and the next tick tries
// again; it returns only when ctx ends.
type reaper struct {
	todos    *host.Todos
	log      *slog.Logger
	interval time.Duration
}

func (r *reaper) String() string { return "lease-reaper" }

func (r *reaper) Serve(ctx context.Context) error {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		n, err := r.todos.ReapExpired(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Error("error reaping expired leases", "reaped", n, "error", err)
		case n > 0:
			r.log.Info("reaped expired leases", "todos", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
