package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
)

// Config configures an Engine. The zero value of every optional field means
// its default.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool

	// Directory answers what the engine must ask of the host. Required.
	Directory Directory

	// SecretKey is the 32-byte operator key that seals connection secrets
	// (SWITCHBOARD_SECRET_KEY). Defaults to none, in which case storing a
	// secret fails with encryption_required.
	SecretKey []byte

	// BaseURL is where board links point (SWITCHBOARD_BASE_URL). Defaults to
	// "http://localhost:8080".
	BaseURL string

	// PushAllowHTTP lets sink base URLs use plain HTTP
	// (SWITCHBOARD_PUSH_ALLOW_HTTP). Defaults to false: HTTPS only.
	PushAllowHTTP bool

	// AppriseSchemesDenied replaces the Apprise schemes refused when a
	// stateless sink or its connection is saved (REQ-4). Defaults to
	// apprise.DefaultDeniedSchemes: the generic HTTP and local-system
	// schemes. Every other scheme is allowed.
	AppriseSchemesDenied []string

	// MaxSinksPerScope is the ceiling of sinks per owner scope. Defaults to
	// MaxSinksPerScopeDefault (10).
	MaxSinksPerScope int

	// BudgetPerHourMin and BudgetPerHourMax bound what an owner may set as a
	// sink's rate. Default to 1 and 120.
	BudgetPerHourMin, BudgetPerHourMax int

	// BudgetBurstMin and BudgetBurstMax bound a sink's burst. Default to 1
	// and 30.
	BudgetBurstMin, BudgetBurstMax int

	// Clock tells the time; tests give a fake one. Defaults to the system
	// clock.
	Clock Clock

	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	c.BaseURL = cmp.Or(c.BaseURL, "http://localhost:8080")
	if c.AppriseSchemesDenied == nil {
		c.AppriseSchemesDenied = apprise.DefaultDeniedSchemes
	}
	c.MaxSinksPerScope = cmp.Or(c.MaxSinksPerScope, MaxSinksPerScopeDefault)
	c.BudgetPerHourMin = cmp.Or(c.BudgetPerHourMin, BudgetPerHourMinDefault)
	c.BudgetPerHourMax = cmp.Or(c.BudgetPerHourMax, BudgetPerHourMaxDefault)
	c.BudgetBurstMin = cmp.Or(c.BudgetBurstMin, BudgetBurstMinDefault)
	c.BudgetBurstMax = cmp.Or(c.BudgetBurstMax, BudgetBurstMaxDefault)
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Pool == nil {
		errs = append(errs, errors.New("Pool is required"))
	}
	if c.Directory == nil {
		errs = append(errs, errors.New("Directory is required"))
	}
	if c.SecretKey != nil && len(c.SecretKey) != 32 {
		errs = append(errs, fmt.Errorf("SecretKey must be 32 bytes, got %d", len(c.SecretKey)))
	}
	if c.BudgetPerHourMin > c.BudgetPerHourMax || c.BudgetBurstMin > c.BudgetBurstMax {
		errs = append(errs, errors.New("budget bounds are inverted"))
	}
	return errors.Join(errs...)
}

// Clock tells the time. The engine reads every time it stores or compares
// (due times, budgets, windows) from its Clock, so a fake clock drives it
// whole.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }
