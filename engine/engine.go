package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/engine/vault"
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
	dbClock  *DatabaseClock

	actors     *actors.Supervisor
	claimer    *claimer
	reserver   *reserver
	recorder   *recorder
	lastNotify atomic.Int64 // wall-clock nanoseconds of the last NOTIFY Emit sent
	serving    atomic.Bool

	// wrapAdapter, set only by tests, wraps every adapter built for a
	// delivery (to make one panic, say).
	wrapAdapter func(sinkID int64, a sinks.Adapter) sinks.Adapter
}

// New validates cfg, fills its defaults and returns an engine. It starts
// nothing: Serve delivers.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("error configuring engine: %w", err)
	}
	cfg = cfg.WithDefaults()
	e := &Engine{
		cfg:      cfg,
		log:      cfg.Logger,
		instance: cfg.Instance,
		vlt:      vault.New(cfg.SecretKey),
		dbClock:  NewDatabaseClock(cfg.Pool, cfg.Clock),
		client: sinks.NewClient(sinks.GuardConfig{
			AllowHTTP:       cfg.PushAllowHTTP,
			AllowedPrefixes: cfg.PrivateHosts,
		}),
	}
	e.actors = actors.NewSupervisor(actors.Config{
		IdleAfter: cfg.ActorIdleAfter,
		Clock:     cfg.Clock,
		Now:       func() time.Time { return e.nowOrLocal(context.Background()) },
		Logger:    cfg.Logger.With("component", "actors"),
	}, worker{e})
	e.claimer = newClaimer(e)
	e.reserver = newReserver(e)
	e.recorder = newRecorder(e)
	return e, nil
}

// Config returns the engine's configuration with its defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Serve delivers until ctx ends: the claimer feeds due rows to one actor
// per sink, a listener wakes the claimer when Emit commits, and a janitor
// removes what is past retention. It returns ctx's error. An engine is
// served once.
func (e *Engine) Serve(ctx context.Context) error {
	if !e.serving.CompareAndSwap(false, true) {
		return errors.New("engine is already serving")
	}
	root := suture.New("switchboard-notify", suture.Spec{
		EventHook: func(ev suture.Event) { e.log.Warn("supervisor event", "event", ev.String()) },
	})
	root.Add(e.actors)
	root.Add(e.claimer)
	root.Add(&listener{e: e})
	root.Add(&janitor{e: e})
	root.Add(&digestScheduler{e: e})
	// The reserver and the recorder outlive the actors: a reservation
	// asked for before the stop is answered, and what was sent is
	// recorded, before Serve returns.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	go e.reserver.run(bg)
	go e.recorder.run(bg)
	err := root.Serve(ctx)
	stopBG()
	<-e.reserver.done
	<-e.recorder.done
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ActorStatus is one sink actor's status.
type ActorStatus = actors.Status

// Status returns the status of every active sink actor of this instance,
// by sink id. It never blocks an actor.
func (e *Engine) Status() []ActorStatus { return e.actors.Status() }

// StatusFor is Status limited to the sinks p may read: a human's own
// scope's and their teams' (D26). Status, the instance-wide view, is for
// operators only; nobody else learns that another scope's sink exists.
func (e *Engine) StatusFor(ctx context.Context, p Principal) ([]ActorStatus, error) {
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
	out := make([]ActorStatus, 0, len(all))
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
			out = append(out, s)
		}
	}
	return out, nil
}

// WrapAdaptersForTest makes every adapter the engine builds pass through
// wrap, so a test or the faults suite can make one panic, stall or count
// its sends. Set it before Serve; production never calls it.
func (e *Engine) WrapAdaptersForTest(wrap func(sinkID int64, a sinks.Adapter) sinks.Adapter) {
	e.wrapAdapter = wrap
}
