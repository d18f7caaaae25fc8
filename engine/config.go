package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/sinks/apprise"
)

// Defaults and operator bounds. Each Config field says which applies.
const (
	MaxSinksPerScopeDefault = 10
	BudgetPerHourDefault    = 30
	BudgetBurstDefault      = 10
	BudgetPerHourMinDefault = 1
	BudgetPerHourMaxDefault = 120
	BudgetBurstMinDefault   = 1
	BudgetBurstMaxDefault   = 30
	QuarantineWindowDefault = 10 * time.Minute
	ClaimTTLDefault         = 2 * time.Minute
	PollIntervalDefault     = time.Second
	NotifyDebounceDefault   = 5 * time.Millisecond
	RetentionDefault        = 30 * 24 * time.Hour
	JanitorIntervalDefault  = time.Hour
	JanitorBatchDefault     = 1000
	ActorStopTimeoutDefault = 12 * time.Second
	RecordGraceDefault      = 8 * time.Second
	StopTimeoutDefault      = 30 * time.Second
)

// The fixed stages of a graceful stop.
const (
	// ReleaseTimeout bounds giving back the claimed rows the sink actors
	// had queued but not begun.
	ReleaseTimeout = 5 * time.Second
	// UnbeatTimeout bounds removing the instance's heartbeat, the stop's
	// last step.
	UnbeatTimeout = 5 * time.Second
)

// Config configures an Engine. The zero value of every optional field means
// its default.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool

	// Directory answers what the engine must ask of the host: which humans
	// and endpoints exist, a human's role in a team, which queues,
	// endpoints, webhooks and todos an owner scope owns. Defaults to nil:
	// one owner, SoleOwner (human 1), and no teams (see SoleOwner).
	Directory Directory

	// SecretKey is the 32-byte operator key that seals connection secrets
	// (SWITCHBOARD_SECRET_KEY). Defaults to none, in which case storing a
	// secret fails with encryption_required.
	SecretKey []byte

	// BaseURL is the prefix of the links messages carry as paths
	// (SWITCHBOARD_BASE_URL): a declaration's Draft.Link "/jobs/12" becomes
	// BaseURL + "/jobs/12". Defaults to "http://localhost:8080".
	BaseURL string

	// Events declares the embedder's event types: their words, default
	// severity, dedup rule and message (EventKind). Emit refuses any other
	// type but the engine's own (digest and agent.notify, which
	// engine/digests and engine/pages emit). The
	// reference host declares its own with host.Events. Defaults to none.
	Events []EventKind

	// Links says where the messages the engine words itself point.
	Links Links

	// PushAllowHTTP lets sink base URLs use plain HTTP
	// (SWITCHBOARD_PUSH_ALLOW_HTTP). Defaults to false: HTTPS only.
	PushAllowHTTP bool

	// AppriseSchemesAllowed is the allowlist of Apprise URL schemes a
	// stateless sink may use, checked when the sink or its connection is
	// saved and again at delivery (REQ-4, D23); lower case. Defaults to
	// apprise.DefaultAllowedSchemes: Apprise's notification services less
	// the generic HTTP and local-system schemes. A non-nil list replaces
	// the default (an empty one allows no stateless sink).
	AppriseSchemesAllowed []string

	// MaxSinksPerScope is the ceiling of sinks per owner scope. Defaults to
	// MaxSinksPerScopeDefault (10).
	MaxSinksPerScope int

	// BudgetPerHourMin and BudgetPerHourMax bound what an owner may set as a
	// sink's rate. Default to 1 and 120.
	BudgetPerHourMin, BudgetPerHourMax int

	// BudgetBurstMin and BudgetBurstMax bound a sink's burst. Default to 1
	// and 30.
	BudgetBurstMin, BudgetBurstMax int

	// PrivateHosts is the operator's private-host allowlist: address
	// ranges the SSRF guard lets deliveries reach although they are
	// private, loopback or otherwise special-purpose
	// (SWITCHBOARD_PRIVATE_HOSTS). Defaults to none.
	PrivateHosts []netip.Prefix

	// Instance names this engine in claims and logs. Defaults to
	// "<hostname>-<pid>-<random>".
	Instance string

	// ClaimTTL is how long a claimed row stays this instance's before
	// another instance may deliver it (at least once, should this one die).
	// Each attempt extends it. Defaults to ClaimTTLDefault (2 minutes).
	ClaimTTL time.Duration

	// HeartbeatEvery is how often this instance records that it is alive
	// (engine clock); HeartbeatTTL how long each record lets it start
	// attempts. An instance that could not beat for HeartbeatTTL starts
	// none (the statements that start attempts check it), and a fence
	// later (HeartbeatFence) the other instances take the rows it held at
	// once rather than after ClaimTTL. Default 5 s and 20 s; HeartbeatTTL
	// must be at least twice HeartbeatEvery.
	HeartbeatEvery time.Duration
	HeartbeatTTL   time.Duration

	// PollInterval is how often the claimer looks for due rows without a
	// notification (wall time). Defaults to PollIntervalDefault (1 s).
	PollInterval time.Duration

	// NotifyDebounce is the least wall time between two NOTIFYs that Emit
	// sends to wake claimers: PostgreSQL serialises the commits of
	// notifying transactions, so a storm notifies once per window; a
	// claimer woken looks again one window (plus 5 ms) later, and once
	// more four such spans after that, which finds what the emits it did
	// not hear of wrote once they committed; the poll finds the ones whose
	// transactions committed later still. Defaults to
	// NotifyDebounceDefault (5 ms: at most 200 NOTIFYs a second, an event
	// at most about 10 ms late); negative notifies on every emit that adds
	// a due row.
	NotifyDebounce time.Duration

	// ActorIdleAfter is how long a sink actor with nothing to do lives on
	// (wall time). Defaults to one minute.
	ActorIdleAfter time.Duration

	// Retention is how long delivery records and finished outbox rows are
	// kept (REQ-10), and with them the history that would otherwise grow
	// without bound: the write log and digest runs (and, through
	// HostCleanUp, the host's own). Defaults to RetentionDefault (30 days).
	Retention time.Duration

	// JanitorInterval is how often one instance removes what is older than
	// Retention. Defaults to JanitorIntervalDefault (1 hour).
	JanitorInterval time.Duration

	// JanitorBatch is the most rows one delete of the janitor removes; each
	// batch commits on its own, so a backlog never makes one long
	// transaction. Defaults to JanitorBatchDefault (1000).
	JanitorBatch int

	// HostCleanUp, when set, is the host's own housekeeping, run by the
	// janitor after the engine's, on one instance at a time (under the
	// janitor's lock), at start and every JanitorInterval: conn is the
	// janitor's own connection (the one holding the lock: use it, not
	// another of the pool, which a small pool may not have to spare), now
	// is the database's clock, before is now less Retention, batch is
	// JanitorBatch. The reference host prunes its received webhook
	// deliveries, sessions, login links and webhook message ids there
	// (host.CleanUp). Defaults to nothing.
	HostCleanUp func(ctx context.Context, conn *pgx.Conn, now, before time.Time, batch int) error

	// OnAttempt, when set, is called after every delivery attempt (and
	// every row held), on the sink actor's goroutine: keep it quick. For
	// metrics and tests.
	OnAttempt func(Attempt)

	// OnClaim, when set, is called with each row the claimer hands to an
	// actor and how late it was (now − due); for metrics.
	OnClaim func(sinkID int64, lag time.Duration)

	// Clock is this instance's own clock: it times waits (timers, idle
	// periods) and measures the time elapsed since the engine last read
	// the database's clock. It never decides an instant another instance
	// compares: those come from the database's clock_timestamp(). Defaults
	// to the real clock.
	Clock clockwork.Clock

	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// A graceful stop (the ctx given to Serve ends) drains in order: the
	// claimer stops claiming at once; the sink actors finish the attempts
	// they began, within ActorStopTimeout; the rows they had only queued
	// are released (ReleaseTimeout, 5 s) for any instance to take; the
	// outcome of every attempt sent is written, for at most RecordGrace
	// after the actors stopped; then the instance's heartbeat is removed
	// (UnbeatTimeout, 5 s), and only then may other instances take at once
	// the rows it still holds. StopTimeout bounds it all.
	//
	// StopTimeout is how long Serve may take to return once its ctx ends:
	// the engine's supervision tree waits that long for its services. It
	// must be at least ActorStopTimeout + ReleaseTimeout + RecordGrace +
	// UnbeatTimeout. Defaults to StopTimeoutDefault (30 s).
	StopTimeout time.Duration

	// ActorStopTimeout is how long a stopping engine waits for its sink
	// actors to finish the attempts they began. It must be at least one
	// attempt's HTTP timeout (sinks.DefaultTimeout, 10 s), so that what
	// was sent is known. Defaults to ActorStopTimeoutDefault (12 s).
	ActorStopTimeout time.Duration

	// RecordGrace is how long a stopping engine, once its actors have
	// stopped, may take to write the outcomes of what they sent (trying
	// again while writes fail); an outcome given up leaves its row to be
	// sent again when its claim expires (at least once). Defaults to
	// RecordGraceDefault (8 s).
	RecordGrace time.Duration
}

// Links are the links of the messages the engine words itself, which the
// embedder's pages answer.
type Links struct {
	// Coalesced, when set, is the link of the message that stands for a
	// sink's held rows when its budget returns (REQ-11), for the sink's
	// owner scope: a path under BaseURL or an absolute http(s) URL, "" for
	// none. The reference host links its notifications page
	// ("/board/notifications", host.Links). Defaults to nil: that message
	// carries no link.
	Coalesced func(owner notifytype.OwnerScope) string

	// Digest, when set, is the link of a digest's message (REQ-13), for
	// the digest's owner scope and id: a path under BaseURL or an absolute
	// http(s) URL, "" for none. The reference host links the digest's
	// board page ("/board/digests/<id>", host.Links). Defaults to nil: the
	// message carries no link.
	Digest func(owner notifytype.OwnerScope, digestID int64) string

	// Item, when set, is the link of an object of the embedder's that a
	// message the engine words names, for the owner scope, the object's
	// kind and id: a path under BaseURL or an absolute http(s) URL, "" for
	// none. A digest's dead letters and a NotifyOwner page about a todo
	// name a todo (ResourceTodo). The reference host links the todo's
	// board page ("/board/todos/<id>", host.Links). Defaults to nil: those
	// lines and messages carry no link.
	Item func(owner notifytype.OwnerScope, kind Resource, id int64) string

	// Text is the words a Markdown message the engine words links (the
	// coalesced message, a digest, a NotifyOwner page): "Open on the
	// board" for the reference host. Defaults to "Open".
	Text string
}

// HeartbeatFence is how long after an instance's heartbeat stopped
// letting it start attempts (HeartbeatTTL after its last beat) the other
// instances wait before they take the rows it holds: the longest send (one
// attempt's HTTP timeout, sinks.DefaultTimeout), the record grace
// (RecordGrace) and one beat (HeartbeatEvery), so that every attempt it
// began has ended and had its grace to be recorded, and an instance that
// merely lost the database for a while beats again first. 23 s with the
// defaults: a database pause shorter than HeartbeatTTL + HeartbeatFence −
// HeartbeatEvery − 2 s (36 s) resends nothing.
func (c Config) HeartbeatFence() time.Duration {
	return sinks.DefaultTimeout + cmp.Or(c.RecordGrace, RecordGraceDefault) + cmp.Or(c.HeartbeatEvery, HeartbeatEveryDefault)
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	c.BaseURL = cmp.Or(c.BaseURL, "http://localhost:8080")
	if c.Directory == nil {
		c.Directory = soleOwnerDirectory{}
	}
	if c.AppriseSchemesAllowed == nil {
		c.AppriseSchemesAllowed = apprise.DefaultAllowedSchemes
	}
	c.MaxSinksPerScope = cmp.Or(c.MaxSinksPerScope, MaxSinksPerScopeDefault)
	c.BudgetPerHourMin = cmp.Or(c.BudgetPerHourMin, BudgetPerHourMinDefault)
	c.BudgetPerHourMax = cmp.Or(c.BudgetPerHourMax, BudgetPerHourMaxDefault)
	c.BudgetBurstMin = cmp.Or(c.BudgetBurstMin, BudgetBurstMinDefault)
	c.BudgetBurstMax = cmp.Or(c.BudgetBurstMax, BudgetBurstMaxDefault)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "switchboard"), os.Getpid(), rand.Text()[:6])
	}
	c.ClaimTTL = cmp.Or(c.ClaimTTL, ClaimTTLDefault)
	c.HeartbeatEvery = cmp.Or(c.HeartbeatEvery, HeartbeatEveryDefault)
	c.HeartbeatTTL = cmp.Or(c.HeartbeatTTL, max(HeartbeatTTLDefault, 2*c.HeartbeatEvery))
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.NotifyDebounce = cmp.Or(c.NotifyDebounce, NotifyDebounceDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.JanitorInterval = cmp.Or(c.JanitorInterval, JanitorIntervalDefault)
	if c.JanitorBatch <= 0 {
		c.JanitorBatch = JanitorBatchDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.ActorStopTimeout = cmp.Or(c.ActorStopTimeout, ActorStopTimeoutDefault)
	c.RecordGrace = cmp.Or(c.RecordGrace, RecordGraceDefault)
	c.StopTimeout = cmp.Or(c.StopTimeout, StopTimeoutDefault)
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Pool == nil {
		errs = append(errs, errors.New("Pool is required"))
	}
	if c.SecretKey != nil && len(c.SecretKey) != 32 {
		errs = append(errs, fmt.Errorf("SecretKey must be 32 bytes, got %d", len(c.SecretKey)))
	}
	if c.BudgetPerHourMin > c.BudgetPerHourMax || c.BudgetBurstMin > c.BudgetBurstMax {
		errs = append(errs, errors.New("budget bounds are inverted"))
	}
	if c.HeartbeatTTL > 0 && c.HeartbeatTTL < 2*cmp.Or(c.HeartbeatEvery, HeartbeatEveryDefault) {
		errs = append(errs, errors.New("HeartbeatTTL must be at least twice HeartbeatEvery"))
	}
	errs = append(errs, c.validateStop()...)
	return errors.Join(errs...)
}

// validateStop checks that each stage of a graceful stop fits inside the
// one that waits for it: an outer timeout shorter than what it waits for
// would cut the stop before what was sent is recorded.
func (c Config) validateStop() []error {
	var errs []error
	if c.StopTimeout < 0 || c.ActorStopTimeout < 0 || c.RecordGrace < 0 {
		errs = append(errs, errors.New("StopTimeout, ActorStopTimeout and RecordGrace must not be negative"))
		return errs
	}
	stop := cmp.Or(c.StopTimeout, StopTimeoutDefault)
	actorStop := cmp.Or(c.ActorStopTimeout, ActorStopTimeoutDefault)
	grace := cmp.Or(c.RecordGrace, RecordGraceDefault)
	if actorStop < sinks.DefaultTimeout {
		errs = append(errs, fmt.Errorf("ActorStopTimeout (%v) must be at least one attempt's HTTP timeout (%v)", actorStop, sinks.DefaultTimeout))
	}
	if inner := actorStop + ReleaseTimeout + grace + UnbeatTimeout; stop < inner {
		errs = append(errs, fmt.Errorf("StopTimeout (%v) must be at least ActorStopTimeout + ReleaseTimeout + RecordGrace + UnbeatTimeout (%v + %v + %v + %v = %v)",
			stop, actorStop, ReleaseTimeout, grace, UnbeatTimeout, inner))
	}
	return errs
}
