package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/thejerf/suture/v4"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/vault"
	"github.com/switchboard/notify/internal/enginecore"
	"github.com/switchboard/notify/internal/enginehooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// Engine is one instance of Switchboard Notify inside an embedding server.
// Several engines may share one database; they coordinate only through it.
type Engine struct {
	cfg      Config
	log      *slog.Logger
	instance string
	vlt      *vault.Vault
	client   *http.Client // the guarded client every delivery goes through
	dbClock  *clocks.Database
	kinds    kinds

	actors   *actors.Supervisor
	claimer  *claimer
	fanOuter *fanOuter
	reserver *reserver
	recorder *recorder
	handed   *handedRows
	renders  *renderCache // the wordings of the rows last rendered
	beats    *beats
	// actorsGone is closed once the sink actors have stopped after the
	// engine's stop: the reserver and the recorder serve until then.
	actorsGone     chan struct{}
	actorsGoneOnce sync.Once
	// outcomesDropped counts outcomes the recorder gave up (OutcomesDropped).
	outcomesDropped atomic.Int64
	// releaseFailed counts the rows a stop could not give back.
	releaseFailed atomic.Int64
	// sinceAnalyze counts the outbox rows fanned out since the outbox was
	// last analyzed; analyzing is set while it is.
	sinceAnalyze atomic.Int64
	analyzing    atomic.Bool
	lastNotify   atomic.Int64 // wall-clock nanoseconds of the last NOTIFY Emit sent

	// runMu guards Start and Stop: runCtx is what every part of the
	// running engine works under, runStop ends it, runDone is closed once
	// the engine stopped, with runErr.
	runMu   sync.Mutex
	runCtx  context.Context
	runStop context.CancelFunc
	runDone chan struct{}
	runErr  error

	// unsavedTests limits the test messages of unsaved settings.
	unsavedTests testWindow

	// wrapAdapter, set only by tests, wraps every adapter built for a
	// delivery (to make one panic, say).
	wrapAdapter func(sinkID int64, a sinks.Adapter) sinks.Adapter
	// testDBClock, set only by tests (Config.Clock an
	// *enginehooks.TestClock, see testhooks.SetDatabaseClock), stands in
	// for the database's clock; nil in production.
	testDBClock clockwork.Clock

	// core is the engine's inside for its feature packages
	// (internal/enginecore); services are the long-running parts they
	// added (the digest scheduler), run under root while it serves.
	core     *enginecore.Core
	svcMu    sync.Mutex
	services []enginecore.Service
	root     *suture.Supervisor
}

// New validates cfg, fills its defaults and returns an engine. It starts
// nothing: Start (or Serve) delivers.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("error configuring engine: %w", err)
	}
	cfg = cfg.WithDefaults()
	k, err := newKinds(cfg.Events)
	if err != nil {
		return nil, fmt.Errorf("error configuring engine: Events: %w", err)
	}
	e := &Engine{
		kinds:    k,
		cfg:      cfg,
		log:      cfg.Logger,
		instance: cfg.Instance,
		vlt:      vault.New(cfg.SecretKey),
		dbClock:  clocks.NewDatabase(cfg.Pool, cfg.Clock),
		client: sinks.NewClient(sinks.GuardConfig{
			AllowHTTP:       cfg.PushAllowHTTP,
			AllowedPrefixes: cfg.PrivateHosts,
		}),
	}
	if tc, ok := cfg.Clock.(*enginehooks.TestClock); ok {
		e.testDBClock = tc.Database
	}
	e.actors = actors.NewSupervisor(actors.Config{
		IdleAfter:   cfg.ActorIdleAfter,
		Clock:       cfg.Clock,
		Now:         func() time.Time { return e.nowOrLocal(context.Background()) },
		Logger:      cfg.Logger.With("component", "actors"),
		StopTimeout: cfg.ActorStopTimeout,
	}, worker{e})
	e.core = e.newCore()
	e.actorsGone = make(chan struct{})
	e.claimer = newClaimer(e)
	e.fanOuter = newFanOuter(e)
	e.reserver = newReserver(e)
	e.recorder = newRecorder(e)
	e.handed = newHandedRows()
	e.renders = newRenderCache(renderCacheSlots)
	e.beats = newBeats()
	return e, nil
}

// Config returns the engine's configuration with its defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Start checks that the engine's tables are migrated (enginemigrate.Up)
// and starts delivering in the background: the claimer feeds due rows to
// one actor per sink, a listener wakes the claimer when Emit commits, a
// fan-out service fans out the backlogs of events a claim pass leaves, a
// janitor removes what is past retention, and the services of the
// engine's feature packages run (engine/digests's scheduler, when the
// product uses digests). ctx bounds the start only; the engine runs until Stop. An
// engine is started once.
func (e *Engine) Start(ctx context.Context) error {
	return e.start(ctx, context.WithoutCancel(ctx))
}

// start is Start with the context the run's is derived from: Start's
// runs until Stop; Serve's ends with Serve's ctx, in the same call that
// ends it, so no part of the engine begins another step after its caller
// cancelled (Stop, on another goroutine, would come later).
func (e *Engine) start(ctx, parent context.Context) error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.runDone != nil {
		return errors.New("engine is already started")
	}
	if err := store.CheckEngineSchema(ctx, e.cfg.Pool); err != nil {
		return fmt.Errorf("error starting engine: %w", err)
	}
	// A first beat before anything claims: no attempt starts without one
	// (store.DispatchFence).
	if err := e.beat(ctx); err != nil {
		return fmt.Errorf("error starting engine: %w", err)
	}
	runCtx, cancel := context.WithCancel(parent)
	e.runCtx, e.runStop, e.runDone = runCtx, cancel, make(chan struct{})
	go func() {
		defer close(e.runDone)
		e.runErr = e.run(runCtx)
	}()
	return nil
}

// Stop stops delivering and waits, until ctx ends, for the engine to
// drain: the deliveries under way finish and are recorded, and the rows
// still queued on this instance are given back, so another instance sends
// them at once. The drain takes at most Config.StopTimeout.
//
// A stop either finishes or says what it left: Stop returns nil only when
// every service stopped, every attempt sent was recorded and every row
// queued was released. Otherwise it returns a *StopError naming what did
// not stop (a service of the engine, a sink actor still in its attempt)
// and what was left (outcomes not written by the record grace, rows not
// released): those rows stay claimed, and are taken by another instance
// when their claims expire (at least once, never lost). When ctx ends
// first, Stop returns ctx's error (the engine goes on stopping in the
// background); it may be called again, to wait longer. An engine not
// started stops at once.
func (e *Engine) Stop(ctx context.Context) error {
	e.runMu.Lock()
	stop, done := e.runStop, e.runDone
	e.runMu.Unlock()
	if done == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return e.runErr
	case <-ctx.Done():
		return fmt.Errorf("error stopping engine: not drained in time: %w", ctx.Err())
	}
}

// Serve is Start, then Stop when ctx ends; the drain is bounded by
// Config.StopTimeout. It returns ctx's error after a clean stop, the
// *StopError of one that left something (see Stop), or Start's error.
func (e *Engine) Serve(ctx context.Context) error {
	if err := e.start(ctx, ctx); err != nil {
		return err
	}
	<-ctx.Done()
	if err := e.Stop(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	return ctx.Err()
}

// run delivers until ctx ends, then stops every part; it returns nil when
// the stop finished, and a *StopError naming what it left otherwise.
//
// Every long-running part of the engine is a service of one suture tree,
// whose stop timeout is Config.StopTimeout. When ctx ends the stop drains,
// each stage inside the one that waits for it (Config.StopTimeout says
// how): the claimer stops claiming; the actors finish the attempts they
// began and release the rows they had only queued, while the reserver
// still answers them; the recorder writes the outcome of every attempt
// sent; then the heartbeat is removed, and run returns.
func (e *Engine) run(ctx context.Context) error {
	root := suture.New("switchboard-notify", suture.Spec{
		EventHook: func(ev suture.Event) { e.log.Warn("supervisor event", "event", ev.String()) },
		Timeout:   e.cfg.StopTimeout,
	})
	root.Add(actorsService{e})
	root.Add(e.reserver)
	root.Add(e.recorder)
	root.Add(e.claimer)
	root.Add(e.fanOuter)
	root.Add(&listener{e: e})
	root.Add(&janitor{e: e})
	root.Add(&heartbeat{e: e})
	e.addServicesTo(root)
	err := root.Serve(ctx)
	e.servicesStopped()
	if ctx.Err() == nil {
		return err
	}
	return e.stopReport(root)
}

// StopError reports a stop that did not finish: what did not stop, and
// what it left claimed (sent again once the claims expire, at least once).
type StopError struct {
	// Unfinished says, one entry each, what did not stop or was left.
	Unfinished []string
}

func (e *StopError) Error() string {
	return "error stopping engine: " + strings.Join(e.Unfinished, "; ")
}

// stopReport reads, once the tree has stopped, what the stop left: the
// services suture reports still running at Config.StopTimeout, the sink
// actors still in an attempt at ActorStopTimeout, the outcomes the
// recorder gave up at its deadline and the rows that could not be
// released.
func (e *Engine) stopReport(root *suture.Supervisor) error {
	var left []string
	if report, err := root.UnstoppedServiceReport(); err == nil {
		for _, u := range report {
			left = append(left, fmt.Sprintf("service %s did not stop within StopTimeout (%v)", u.Name, e.cfg.StopTimeout))
		}
	}
	for _, name := range e.actors.Unstopped() {
		left = append(left, fmt.Sprintf("%s was still in its attempt at ActorStopTimeout (%v)", name, e.cfg.ActorStopTimeout))
	}
	if n := e.recorder.unrecorded.Load(); n > 0 {
		left = append(left, fmt.Sprintf("recorder: %d delivery outcomes not written within RecordGrace (%v); their rows stay claimed until their claims expire",
			n, e.cfg.RecordGrace))
	}
	if n := e.releaseFailed.Load(); n > 0 {
		left = append(left, fmt.Sprintf("%d queued rows not released; they stay claimed until their claims expire", n))
	}
	if len(left) == 0 {
		return nil
	}
	err := &StopError{Unfinished: left}
	e.log.Error("engine stopped without finishing", "error", err)
	return err
}

// markActorsGone tells the reserver and the recorder that the sink
// actors have stopped after the engine's stop, and starts the recorder's
// grace: the stop's one deadline for every write.
func (e *Engine) markActorsGone() {
	e.actorsGoneOnce.Do(func() {
		e.recorder.armGrace()
		close(e.actorsGone)
	})
}

// actorsService runs the sink actors' supervisor in the engine's tree and
// tells the reserver and the recorder, once the engine stops, that the
// actors have finished (actorsGone).
type actorsService struct{ e *Engine }

func (s actorsService) String() string { return "sink-actors" }

func (s actorsService) Serve(ctx context.Context) error {
	err := s.e.actors.Serve(ctx)
	if ctx.Err() != nil {
		s.e.markActorsGone()
	}
	return err
}

// OutcomesDropped is how many delivery outcomes this engine could not
// write and gave up (each logged): their rows were sent again once their
// claims expired. It should stay 0; the metric
// switchboard_outcomes_dropped_total exports it.
func (e *Engine) OutcomesDropped() int64 { return e.outcomesDropped.Load() }

// readableScopes lists the owner scopes whose sinks p may read, as
// authorize decides them.
func (e *Engine) readableScopes(ctx context.Context, p Principal, lister TeamLister) ([]string, error) {
	var candidates []notifytype.OwnerScope
	switch {
	case p.HumanID == "":
		return nil, nil
	case p.EndpointID != 0:
		candidates = []notifytype.OwnerScope{p.EndpointScope}
	default:
		teams, err := lister.MemberTeams(ctx, p.HumanID)
		if err != nil {
			return nil, fmt.Errorf("error listing the human's teams: %w", err)
		}
		candidates = append(candidates, notifytype.Human(p.HumanID))
		for _, t := range teams {
			candidates = append(candidates, notifytype.Team(t))
		}
	}
	out := make([]string, 0, len(candidates))
	for _, sc := range candidates {
		if sc.Kind == notifytype.ScopeTeam && p.EndpointID == 0 {
			// Listed as a member: a member reads (D2); no second look-up.
			out = append(out, sc.String())
			continue
		}
		switch err := e.authorize(ctx, p, sc, false); {
		case err == nil:
			out = append(out, sc.String())
		case errors.Is(err, notifytype.ErrNotFound), errors.Is(err, notifytype.ErrForbidden):
		default:
			return nil, err
		}
	}
	return out, nil
}

// statusFiltered is SinkStatuses for a Directory that cannot list a human's
// teams: every active actor, filtered by its sink's owner.
func (e *Engine) statusFiltered(ctx context.Context, p Principal) ([]SinkStatus, error) {
	all := e.actors.Status()
	ids := make([]int64, len(all))
	for i, s := range all {
		ids[i] = s.SinkID
	}
	owners, err := store.SinkOwners(ctx, e.cfg.Pool, ids)
	if err != nil {
		return nil, wrapErr(err, "reading actor status")
	}
	readable := map[notifytype.OwnerScope]bool{}
	out := make([]SinkStatus, 0, len(all))
	for _, s := range all {
		owner, ok := owners[s.SinkID]
		if !ok {
			continue // deleted since: nobody's
		}
		may, seen := readable[owner]
		if !seen {
			err := e.authorize(ctx, p, owner, false)
			switch {
			case err == nil:
				may = true
			case errors.Is(err, notifytype.ErrNotFound), errors.Is(err, notifytype.ErrForbidden):
			default:
				return nil, wrapErr(err, "reading actor status")
			}
			readable[owner] = may
		}
		if may {
			out = append(out, sinkStatusOut(s))
		}
	}
	return out, nil
}
