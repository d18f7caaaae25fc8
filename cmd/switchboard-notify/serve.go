package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
)

// Server timeouts.
const (
	readHeaderTimeout = 10 * time.Second
	shutdownTimeout   = 15 * time.Second
	healthTimeout     = 2 * time.Second
)

// runServe is the serve command: it opens and migrates the database, builds
// the engine over the reference host, prints demo credentials on an empty
// database, and serves HTTP until ctx is cancelled (SIGINT, SIGTERM), then
// shuts down gracefully.
func runServe(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	pool, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	log.Info("database ready", "database", redactedDatabase(cfg.DatabaseURL), "migration", lastMigration())

	eng, err := engine.New(engine.Config{
		Pool:                 pool,
		Directory:            host.NewDirectory(pool),
		SecretKey:            cfg.SecretKey,
		BaseURL:              cfg.BaseURL,
		PushAllowHTTP:        cfg.PushAllowHTTP,
		AppriseSchemesDenied: cfg.AppriseSchemesDenied,
		MaxSinksPerScope:     cfg.MaxSinks,
		PrivateHosts:         cfg.PrivateHosts,
		Logger:               log,
	})
	if err != nil {
		return err
	}
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- eng.Serve(engineCtx) }()
	log.Info("engine ready", "base_url", eng.Config().BaseURL, "max_sinks_per_scope", eng.Config().MaxSinksPerScope)
	if cfg.SecretKey == nil {
		log.Warn("SWITCHBOARD_SECRET_KEY is not set: connection secrets cannot be stored")
	}

	accounts := host.NewAccounts(pool)
	if n, err := accounts.CountHumans(ctx); err != nil {
		return err
	} else if n == 0 {
		if err := demo(ctx, pool, cfg.BaseURL, stdout); err != nil {
			return err
		}
	}

	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthHandler(pool))
	// TODO(lead): mount the surfaces (api/) here.

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening on http://"+ln.Addr().String(), "base_url", cfg.BaseURL)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return fmt.Errorf("error serving HTTP: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("error shutting down HTTP: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error serving HTTP: %w", err)
	}
	stopEngine()
	if err := <-engineDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("error stopping the engine: %w", err)
	}
	log.Info("stopped")
	return nil
}

// pinger is what the health check asks: a *pgxpool.Pool.
type pinger interface {
	Ping(ctx context.Context) error
}

// healthHandler answers 200 "ok" when the database answers within
// healthTimeout, 503 otherwise. It never says why: the reason goes to the
// log.
func healthHandler(db pinger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := db.Ping(ctx); err != nil {
			slog.WarnContext(r.Context(), "health check: database unavailable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "database unavailable")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
