package engine

import (
	"fmt"
	"log/slog"
)

// Engine is one instance of Switchboard Notify inside an embedding server.
// Several engines may share one database; they coordinate only through it.
type Engine struct {
	cfg Config
	log *slog.Logger
}

// New validates cfg, fills its defaults and returns an engine. It starts
// nothing: Serve delivers.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("error configuring engine: %w", err)
	}
	cfg = cfg.WithDefaults()
	return &Engine{cfg: cfg, log: cfg.Logger}, nil
}

// Config returns the engine's configuration with its defaults filled in.
func (e *Engine) Config() Config { return e.cfg }
