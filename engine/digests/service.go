// Package digests is the reference product's queue digests (REQ-12 to
// REQ-14), built on the engine: a digest is a schedule over an owner
// scope's queues, whose report (package engine/digest: the schedule
// grammar and the report's words) goes to the scope's sinks through the
// engine's outbox, and optionally to Cairn.
//
// An embedder that wants digests makes a Service on its engine (New) and
// answers the figures through Sources; the engine then runs the digest
// scheduler under its own supervision, from Start to Stop, on every
// instance: a scheduled time is claimed by one atomic update on the
// database's clock, so exactly one instance sends it.
package digests

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/internal/enginecore"
)

// Defaults of Config.
const (
	IntervalDefault       = 30 * time.Second
	SectionTimeoutDefault = 5 * time.Second
)

// Config configures the digests of an engine. The zero value of every
// field means its default.
type Config struct {
	// Sources gives the figures of digest sections (REQ-13); the host
	// implements it (host.NewDigestSources). Defaults to none: every
	// section but "could not deliver" then reads "unavailable: not
	// measured on this instance".
	Sources Sources

	// Interval is how often (wall time) the scheduler looks for due
	// digests; which are due is decided on the database's clock. Defaults
	// to IntervalDefault (30 s).
	Interval time.Duration

	// SectionTimeout bounds each section's source; a section past it reads
	// "unavailable". Defaults to SectionTimeoutDefault (5 s).
	SectionTimeout time.Duration
}

// Service manages one engine's digests and sends them when due.
type Service struct {
	core *enginecore.Core
	cfg  Config
	log  *slog.Logger
}

// New returns the digests of e, and has e run the digest scheduler under
// its supervision tree: from Start, or at once when e already serves. Make
// one Service per engine.
func New(e *engine.Engine, cfg Config) *Service {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.SectionTimeout = cmp.Or(cfg.SectionTimeout, SectionTimeoutDefault)
	core := enginecore.Of(e)
	s := &Service{core: core, cfg: cfg, log: core.Logger}
	core.AddService(&scheduler{s: s})
	return s
}

// Config returns the service's configuration with its defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// principal is p as the engine's inside takes it.
func principal(p engine.Principal) enginecore.Principal { return enginecore.Principal(p) }
