package rig

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/bench/internal/workload"
	"github.com/switchboard/notify/host"
)

// migrate applies the engine's migrations and River's (the River baseline
// shares the database).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := host.Migrate(ctx, pool); err != nil {
		return err
	}
	return workload.MigrateRiver(ctx, pool)
}
