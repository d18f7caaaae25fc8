package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/store"
)

// connectTimeout bounds each attempt to reach the server at start-up.
const connectTimeout = 10 * time.Second

// ensureDatabase creates the database DATABASE_URL names when it does not
// exist, connecting to the server's "postgres" database to do so. Another
// instance creating it at the same moment is not an error.
func ensureDatabase(ctx context.Context, databaseURL string, log *slog.Logger) error {
	pc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return errors.New("error parsing DATABASE_URL") // the URL may hold a password
	}
	name := pc.Database
	pc.Database = "postgres"
	pc.ConnectTimeout = connectTimeout

	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("error connecting to %s to create database %q: %w", redactedDatabase(databaseURL), name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("error looking for database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil // duplicate_database, or its unique_violation form under a race
	}
	if err != nil {
		return fmt.Errorf("error creating database %q: %w", name, err)
	}
	log.Info("created database", "database", name)
	return nil
}

// openDatabase creates the database if missing, opens a pool on it, checks
// that it answers and applies the migrations.
func openDatabase(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, error) {
	if err := ensureDatabase(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("error parsing DATABASE_URL")
	}
	pc.ConnConfig.ConnectTimeout = connectTimeout
	store.ApplyPoolDefaults(pc, cfg.DatabaseURL)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("error opening database %s: %w", redactedDatabase(cfg.DatabaseURL), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error reaching database %s: %w", redactedDatabase(cfg.DatabaseURL), err)
	}
	if err := host.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error migrating database %s: %w", redactedDatabase(cfg.DatabaseURL), err)
	}
	return pool, nil
}

// runMigrate is the migrate command.
func runMigrate(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	pool, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	fmt.Fprintf(stdout, "database %s: engine at migration %s (schema %s), host at migration %s\n",
		redactedDatabase(cfg.DatabaseURL), lastMigration(store.EngineMigrationList()), store.EngineSchema,
		lastMigration(hoststore.MigrationList()))
	return nil
}

func lastMigration(ms []store.Migration) string {
	if len(ms) == 0 {
		return "none"
	}
	return ms[len(ms)-1].Name
}
