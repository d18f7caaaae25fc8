package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/switchboard/notify/api"
	"github.com/switchboard/notify/api/demo"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/api/ops"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/store"
)

// Server timeouts and the operator API's per-human limit.
const (
	apiRatePerSecond = 5
	apiBurst         = 30

	shutdownTimeout = 15 * time.Second
	// serveStopMargin is how much longer the serve command's supervisor
	// waits for the engine than the engine's own StopTimeout.
	serveStopMargin = 5 * time.Second
	healthTimeout   = 2 * time.Second
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
	log.Info("database ready", "database", redactedDatabase(cfg.DatabaseURL), "engine_migration", lastMigration(store.EngineMigrationList()), "host_migration", lastMigration(hoststore.MigrationList()))

	var receivers *demo.Receivers
	allowHTTP, privateHosts := cfg.PushAllowHTTP, cfg.PrivateHosts
	if cfg.Demo {
		// The demo's receivers listen on loopback over plain HTTP: allowed
		// for this server only because the demo is on.
		if receivers, err = demo.StartReceivers(); err != nil {
			return fmt.Errorf("error starting the demo receivers: %w", err)
		}
		defer receivers.Close()
		allowHTTP = true
		privateHosts = append(slices.Clone(privateHosts), netip.MustParsePrefix("127.0.0.1/32"))
	}
	var metrics *ops.Metrics
	eng, err := engine.New(engine.Config{
		Pool:      pool,
		Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links(),
		SecretKey:             cfg.SecretKey,
		BaseURL:               cfg.BaseURL,
		PushAllowHTTP:         allowHTTP,
		AppriseSchemesAllowed: cfg.AppriseSchemesAllowed,
		MaxSinksPerScope:      cfg.MaxSinks,
		BudgetPerHourMin:      cfg.BudgetPerHourMin,
		BudgetPerHourMax:      cfg.BudgetPerHourMax,
		BudgetBurstMin:        cfg.BudgetBurstMin,
		BudgetBurstMax:        cfg.BudgetBurstMax,
		ClaimTTL:              cfg.ClaimTTL,
		PrivateHosts:          privateHosts,
		Logger:                log,
		OnAttempt:             func(a engine.Attempt) { metrics.OnAttempt(a) },
		OnClaim:               func(sink int64, lag time.Duration) { metrics.OnClaim(sink, lag) },
		HostCleanUp:           host.CleanUp(log.With("component", "host")),
	})
	if err != nil {
		return err
	}
	// The product's queue digests: their scheduler runs under the engine.
	digestService := digests.New(eng, digests.Config{Sources: host.NewDigestSources(pool)})
	metrics = ops.NewMetrics(pool, eng.AllSinkStatuses)
	metrics.OutcomesDropped = eng.OutcomesDropped
	accounts := host.NewAccounts(pool)
	directory := host.NewDirectory(pool)
	todos := host.NewTodos(pool, eng, nil)

	// The engine and the lease reaper run under one supervisor on every
	// instance; they coordinate with other instances only through the
	// database.
	// Its stop timeout covers the engine's own (outer ≥ inner): cut
	// shorter, the pool would close under a stop still recording what
	// was sent.
	services := suture.New("switchboard-notify-serve", suture.Spec{
		EventHook: func(ev suture.Event) { log.Warn("service event", "event", ev.String()) },
		Timeout:   eng.Config().StopTimeout + serveStopMargin,
	})
	engSvc := &engineService{eng: eng}
	services.Add(engSvc)
	services.Add(&reaper{todos: todos, log: log.With("component", "reaper"), interval: reapInterval})
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	engineDone := make(chan error, 1)
	go func() { engineDone <- services.Serve(engineCtx) }()
	engineWaited := false
	defer func() {
		if !engineWaited { // an early return: the engine still stops, and is waited for
			stopEngine()
			<-engineDone
		}
	}()
	log.Info("engine ready", "base_url", eng.Config().BaseURL, "max_sinks_per_scope", eng.Config().MaxSinksPerScope)
	if cfg.SecretKey == nil {
		log.Warn("SWITCHBOARD_SECRET_KEY is not set: connection secrets cannot be stored")
	}
	deps := httpx.Deps{
		Engine:    eng,
		Digests:   digestService,
		Accounts:  accounts,
		Endpoints: host.NewEndpoints(pool, directory, todos, nil),
		Todos:     todos,
		Webhooks:  host.NewWebhooks(host.WebhooksConfig{Pool: pool, Emitter: eng, SecretKey: cfg.SecretKey}),
		Pool:      pool,
		Limiter:   httpx.NewLimiter(apiRatePerSecond, apiBurst),
		Logger:    log,
		Clock:     clocks.System{},
		BaseURL:   cfg.BaseURL,
	}
	deps.AuthFailures = httpx.NewAuthFailures(float64(cfg.AuthFailuresPerMinute), cfg.AuthFailuresBurst, deps.Clock)
	deps.Auth = &httpx.Auth{Accounts: deps.Accounts, Endpoints: deps.Endpoints, Clock: deps.Clock, Failures: deps.AuthFailures}

	// The operator's commands print links for this address when their own
	// shell does not set SWITCHBOARD_BASE_URL (linkBase).
	if err := hoststore.RecordBaseURL(ctx, pool, cfg.BaseURL); err != nil {
		return err
	}
	if n, err := accounts.CountHumans(ctx); err != nil {
		return err
	} else if n == 0 || cfg.Demo {
		if err := demoCredentials(ctx, pool, cfg.BaseURL, stdout); err != nil {
			return err
		}
	}
	var demoHandler http.Handler
	if cfg.Demo {
		h, err := accounts.HumanByEmail(ctx, demoEmail)
		if err != nil {
			return err
		}
		world, err := demo.Setup(ctx, deps, receivers, h.ID)
		if err != nil {
			return err
		}
		demoHandler = demo.Handler(deps, world)
		fmt.Fprintf(stdout, "Demo: log in with the link above, then open %s/demo and press the button.\n", cfg.BaseURL)
		fmt.Fprintf(stdout, "Demo digest: %s/board/digests/%d shows it now and sends one on demand.\n\n", cfg.BaseURL, world.DigestID)
	}
	handler := api.NewHandler(deps, api.Options{Metrics: metrics, Health: healthHandler(pool), Demo: demoHandler})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Listen, err)
	}
	httpCfg := cfg.HTTP
	httpCfg.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	srv := api.NewServer(handler, httpCfg)
	log.Info("listening on http://"+ln.Addr().String(), "base_url", cfg.BaseURL,
		"read_timeout", srv.ReadTimeout, "write_timeout", srv.WriteTimeout, "idle_timeout", srv.IdleTimeout,
		"max_conns", httpCfg.WithDefaults().MaxConns, "max_conns_per_client", httpCfg.WithDefaults().MaxConnsPerClient,
		"reserved_conns", httpCfg.WithDefaults().ReservedConns, "trusted_proxies", len(httpCfg.TrustedProxies))

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	engineWaited = true
	err = stopServing(ctx, log, srv, serveErr, shutdownTimeout, stopEngine, func() error {
		return waitEngine(engineDone, services, engSvc, eng.Config().StopTimeout+serveStopMargin)
	})
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// stopServing waits for ctx to end (or HTTP to fail), shuts HTTP down
// within shutdown, then stops the engine and waits for it, always: even
// when HTTP's shutdown hit its limit, serve returns only once the engine
// has stopped (its supervisor returns within StopTimeout +
// serveStopMargin: stopBound in all). It returns every error met, the
// engine's report of what its stop left included.
func stopServing(ctx context.Context, log *slog.Logger, srv httpServer, serveErr <-chan error, shutdown time.Duration,
	stopEngine func(), waitEngine func() error) error {
	var httpErr error
	select {
	case err := <-serveErr:
		httpErr = fmt.Errorf("error serving HTTP: %w", err)
	case <-ctx.Done():
		log.Info("shutting down")
		httpErr = shutdownHTTP(ctx, srv, serveErr, shutdown)
	}
	stopEngine()
	return errors.Join(httpErr, waitEngine())
}

// stopBound is how long serve may take to return once its ctx ends: the
// HTTP shutdown, then the engine's stop and the supervisor's margin.
func stopBound(engineStop time.Duration) time.Duration {
	return shutdownTimeout + engineStop + serveStopMargin
}

// httpServer is what shutdownHTTP stops: an *api.Server.
type httpServer interface {
	Shutdown(ctx context.Context) error
	Close() error
}

// shutdownHTTP stops the HTTP server within shutdown; connections
// still open at the limit are closed.
func shutdownHTTP(ctx context.Context, srv httpServer, serveErr <-chan error, shutdown time.Duration) error {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(shutdownCtx); err != nil {
		errs = append(errs, fmt.Errorf("error shutting down HTTP: %w", err))
		_ = srv.Close() // cut what did not finish: the engine must still stop
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("error serving HTTP: %w", err))
	}
	return errors.Join(errs...)
}

// waitEngine waits for the serve command's supervisor, which has been told
// to stop, and returns what the engine's stop left (its *engine.StopError)
// and any service that did not stop within the supervisor's timeout.
func waitEngine(done <-chan error, services *suture.Supervisor, eng *engineService, timeout time.Duration) error {
	var errs []error
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, fmt.Errorf("error stopping the engine: %w", err))
	}
	if err := eng.stopErr(); err != nil {
		errs = append(errs, err)
	}
	if report, err := services.UnstoppedServiceReport(); err == nil {
		for _, u := range report {
			errs = append(errs, fmt.Errorf("error stopping: %s did not stop within %v", u.Name, timeout))
		}
	}
	return errors.Join(errs...)
}

// engineService serves the engine under the serve command's supervisor,
// and keeps what its stop reported.
type engineService struct {
	eng *engine.Engine
	mu  sync.Mutex
	err error
}

func (s *engineService) Serve(ctx context.Context) error {
	err := s.eng.Serve(ctx)
	if ctx.Err() != nil && err != nil && !errors.Is(err, context.Canceled) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return err
}

func (*engineService) String() string { return "engine" }

// stopErr is what the engine's stop reported (an *engine.StopError), nil
// after a clean stop.
func (s *engineService) stopErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
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
