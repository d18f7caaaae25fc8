package httpx

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/clocks"
	"github.com/switchboard/notify/engine/digests"
	"github.com/switchboard/notify/host"
)

// Deps is what every surface is built from.
type Deps struct {
	Engine *engine.Engine
	// Digests are the engine's queue digests (digests.New on Engine).
	Digests   *digests.Service
	Accounts  *host.Accounts
	Endpoints *host.Endpoints
	Todos     *host.Todos
	// Webhooks receives deliveries at /hooks/{id} and serves the rule
	// verbs of every surface.
	Webhooks *host.Webhooks
	Pool     *pgxpool.Pool
	Auth     *Auth
	// AuthFailures limits failed authentication per client address on
	// /hooks (the same limiter as Auth.Failures). Nil limits nothing.
	AuthFailures *AuthFailures
	// Limiter is the per-human limiter all management routes share.
	Limiter *Limiter
	Logger  *slog.Logger
	Clock   clocks.Clock
	// BaseURL is SWITCHBOARD_BASE_URL: links and the cookie's Secure flag
	// (set when it is https) come from it.
	BaseURL string
}
