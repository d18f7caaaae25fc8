package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
	"github.com/switchboard/notify/sinks/gotify"
	"github.com/switchboard/notify/store"
)

// SinkInput is a sink as a caller creates it (REQ-2).
type SinkInput struct {
	// Owner is the owner scope the sink belongs to. Required.
	Owner notifytype.OwnerScope

	// Name is unique in the owner scope: 1 to 64 printable characters.
	// Required.
	Name string

	// Kind is gotify or apprise. Required.
	Kind string

	// ConnectionID names a connection of the same owner scope and kind.
	// Required; any other connection is forbidden.
	ConnectionID int64

	// Enabled defaults to true.
	Enabled *bool

	// Options are the kind's options as JSON (gotify.ParseOptions,
	// apprise.ParseOptions). Defaults to the kind's defaults. They are
	// stored normalised, defaults filled in.
	Options json.RawMessage

	// BudgetPerHour and BudgetBurst are the sink's token bucket (D8), within
	// the operator's bounds. Default to 30 and 10 (clamped into the bounds);
	// zero means the default.
	BudgetPerHour, BudgetBurst int
}

// SinkPatch changes a sink; a nil field keeps its value.
type SinkPatch struct {
	Name          *string
	ConnectionID  *int64
	Enabled       *bool
	Options       *json.RawMessage
	BudgetPerHour *int
	BudgetBurst   *int
}

// Sink is a sink as the service returns it. UpdatedByHumanID and
// UpdatedByEndpointID record the last writer (an endpoint's write records
// its accountable human too).
type Sink struct {
	ID                  int64
	Owner               notifytype.OwnerScope
	Name                string
	Kind                string
	ConnectionID        int64
	Enabled             bool
	Options             json.RawMessage
	BudgetPerHour       int
	BudgetBurst         int
	CreatedAt           time.Time
	UpdatedAt           time.Time
	UpdatedByHumanID    string
	UpdatedByEndpointID int64
}

func sinkOut(s store.Sink) Sink {
	return Sink{
		ID: s.ID, Owner: s.Owner, Name: s.Name, Kind: s.Kind, ConnectionID: s.ConnectionID, Enabled: s.Enabled,
		Options: json.RawMessage(s.Options), BudgetPerHour: s.BudgetPerHour, BudgetBurst: s.BudgetBurst,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		UpdatedByHumanID: s.UpdatedByHumanID, UpdatedByEndpointID: s.UpdatedByEndpointID,
	}
}

// CreateSink validates and stores a sink: owner scope permissions, name,
// kind, connection (same scope and kind, else forbidden), options, Apprise
// URL schemes, budget bounds, and the per-scope ceiling, which holds under
// concurrent creates.
func (e *Engine) CreateSink(ctx context.Context, p Principal, in SinkInput) (Sink, error) {
	s, err := e.createSink(ctx, p, in)
	return s, wrapErr(err, "creating sink")
}

func (e *Engine) createSink(ctx context.Context, p Principal, in SinkInput) (Sink, error) {
	if err := e.authorizeTarget(ctx, p, in.Owner); err != nil {
		return Sink{}, err
	}
	if in.Kind != KindGotify && in.Kind != KindApprise {
		return Sink{}, notifytype.InvalidArgument("kind", "must be gotify or apprise")
	}
	if err := checkName(in.Name); err != nil {
		return Sink{}, err
	}
	if in.ConnectionID <= 0 {
		return Sink{}, notifytype.InvalidArgument("connection_id", "is required")
	}
	row := store.Sink{
		Owner: in.Owner, Name: in.Name, Kind: in.Kind, ConnectionID: in.ConnectionID, Enabled: true,
		BudgetPerHour:    clampDefault(BudgetPerHourDefault, e.cfg.BudgetPerHourMin, e.cfg.BudgetPerHourMax),
		BudgetBurst:      clampDefault(BudgetBurstDefault, e.cfg.BudgetBurstMin, e.cfg.BudgetBurstMax),
		UpdatedByHumanID: p.HumanID, UpdatedByEndpointID: p.EndpointID,
	}
	if in.Enabled != nil {
		row.Enabled = *in.Enabled
	}
	if in.BudgetPerHour != 0 {
		row.BudgetPerHour = in.BudgetPerHour
	}
	if in.BudgetBurst != 0 {
		row.BudgetBurst = in.BudgetBurst
	}
	if err := e.checkBudget(row.BudgetPerHour, row.BudgetBurst); err != nil {
		return Sink{}, err
	}

	var out store.Sink
	err := pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		// One writer per scope from here: the ceiling's count and the
		// insert see the same set of sinks.
		if err := store.LockOwnerScope(ctx, tx, in.Owner); err != nil {
			return err
		}
		var err error
		if row.Options, err = e.checkDelivery(ctx, tx, row.Owner, row.Kind, row.ConnectionID, in.Options); err != nil {
			return err
		}
		n, err := store.CountSinks(ctx, tx, in.Owner)
		if err != nil {
			return err
		}
		if n >= e.cfg.MaxSinksPerScope {
			return notifytype.InvalidArgumentf("sinks", "this owner scope already has %d sinks, the most allowed; delete one first", e.cfg.MaxSinksPerScope)
		}
		if out, err = store.InsertSink(ctx, tx, row); err != nil {
			return nameTaken(err)
		}
		return recordWrite(ctx, tx, p, out.Owner, writeSinkCreate, objectSink, out.ID)
	})
	if err != nil {
		return Sink{}, err
	}
	return sinkOut(out), nil
}

// GetSink reads one sink; another scope's sink is not_found.
func (e *Engine) GetSink(ctx context.Context, p Principal, id int64) (Sink, error) {
	s, err := e.readSink(ctx, p, id, false)
	if err != nil {
		return Sink{}, wrapErr(err, "reading sink")
	}
	return sinkOut(s), nil
}

// readSink reads a sink and authorizes the caller on its scope.
func (e *Engine) readSink(ctx context.Context, p Principal, id int64, write bool) (store.Sink, error) {
	s, err := store.GetSink(ctx, e.cfg.Pool, id)
	if err != nil {
		return store.Sink{}, notFoundIfNoRows(err, "sink")
	}
	if err := e.authorizeResource(ctx, p, s.Owner, write, "sink"); err != nil {
		return store.Sink{}, err
	}
	return s, nil
}

// ListSinks lists an owner scope's sinks, by name.
func (e *Engine) ListSinks(ctx context.Context, p Principal, scope notifytype.OwnerScope) ([]Sink, error) {
	if err := e.authorize(ctx, p, scope, false); err != nil {
		return nil, err
	}
	rows, err := store.ListSinks(ctx, e.cfg.Pool, scope)
	if err != nil {
		return nil, wrapErr(err, "listing sinks")
	}
	out := make([]Sink, len(rows))
	for i, r := range rows {
		out[i] = sinkOut(r)
	}
	return out, nil
}

// UpdateSink changes a sink with the same checks as CreateSink. The
// connection and options are checked again whenever the write changes them
// or enables the sink, so a sink is never switched on against a connection
// or scheme that is no longer allowed; disabling always succeeds.
func (e *Engine) UpdateSink(ctx context.Context, p Principal, id int64, patch SinkPatch) (Sink, error) {
	s, err := e.updateSink(ctx, p, id, patch)
	return s, wrapErr(err, "updating sink")
}

func (e *Engine) updateSink(ctx context.Context, p Principal, id int64, patch SinkPatch) (Sink, error) {
	if _, err := e.readSink(ctx, p, id, true); err != nil {
		return Sink{}, err
	}
	if patch.Name != nil {
		if err := checkName(*patch.Name); err != nil {
			return Sink{}, err
		}
	}
	if patch.ConnectionID != nil && *patch.ConnectionID <= 0 {
		return Sink{}, notifytype.InvalidArgument("connection_id", "is required")
	}
	var out store.Sink
	err := pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		row, err := store.GetSinkForUpdate(ctx, tx, id)
		if err != nil {
			return notFoundIfNoRows(err, "sink")
		}
		raw := json.RawMessage(row.Options)
		if patch.Name != nil {
			row.Name = *patch.Name
		}
		if patch.ConnectionID != nil {
			row.ConnectionID = *patch.ConnectionID
		}
		if patch.Enabled != nil {
			row.Enabled = *patch.Enabled
		}
		if patch.Options != nil {
			raw = *patch.Options
		}
		if patch.BudgetPerHour != nil || patch.BudgetBurst != nil {
			if patch.BudgetPerHour != nil {
				row.BudgetPerHour = *patch.BudgetPerHour
			}
			if patch.BudgetBurst != nil {
				row.BudgetBurst = *patch.BudgetBurst
			}
			if err := e.checkBudget(row.BudgetPerHour, row.BudgetBurst); err != nil {
				return err
			}
		}
		if patch.ConnectionID != nil || patch.Options != nil || (patch.Enabled != nil && *patch.Enabled) {
			if row.Options, err = e.checkDelivery(ctx, tx, row.Owner, row.Kind, row.ConnectionID, raw); err != nil {
				return err
			}
		}
		row.UpdatedByHumanID, row.UpdatedByEndpointID = p.HumanID, p.EndpointID
		if out, err = store.UpdateSink(ctx, tx, row); err != nil {
			return nameTaken(err)
		}
		return recordWrite(ctx, tx, p, out.Owner, writeSinkUpdate, objectSink, out.ID)
	})
	if err != nil {
		return Sink{}, err
	}
	return sinkOut(out), nil
}

// SetSinkEnabled enables or disables a sink (UpdateSink with Enabled only).
func (e *Engine) SetSinkEnabled(ctx context.Context, p Principal, id int64, enabled bool) (Sink, error) {
	return e.UpdateSink(ctx, p, id, SinkPatch{Enabled: &enabled})
}

// DeleteSink deletes a sink with its subscriptions and pending outbox rows;
// its delivery records stay (REQ-5).
func (e *Engine) DeleteSink(ctx context.Context, p Principal, id int64) error {
	s, err := e.readSink(ctx, p, id, true)
	if err != nil {
		return wrapErr(err, "deleting sink")
	}
	err = pgx.BeginFunc(ctx, e.cfg.Pool, func(tx pgx.Tx) error {
		if err := store.DeleteSink(ctx, tx, id); err != nil {
			return notFoundIfNoRows(err, "sink")
		}
		return recordWrite(ctx, tx, p, s.Owner, writeSinkDelete, objectSink, id)
	})
	return wrapErr(err, "deleting sink")
}

// checkDelivery checks what a sink of owner and kind delivers through: its
// connection (same scope, same kind, else forbidden) and its options, and
// for Apprise that exactly one of options.config_key and the connection's
// URLs is set and, for a stateless sink, that every URL's scheme is allowed
// (forbidden_scheme, REQ-4). It returns the options normalised.
func (e *Engine) checkDelivery(ctx context.Context, db store.DBTX, owner notifytype.OwnerScope, kind string, connID int64, raw json.RawMessage) ([]byte, error) {
	// Only Apprise needs the secret (its URLs); a Gotify token stays sealed.
	var secret notifytype.Secret
	var err error
	if kind == KindApprise {
		_, secret, err = e.openConnection(ctx, db, connID, owner, kind)
	} else {
		_, err = connectionFor(ctx, db, connID, owner, kind)
	}
	if err != nil {
		return nil, err
	}
	return e.checkOptions(kind, raw, secret, connID)
}

// checkOptions checks a sink's options against its connection's secret
// (for Apprise: exactly one of config_key and URLs, and every URL's
// scheme allowed) and returns them normalised. connID names the
// connection in an error; 0 for one not stored yet.
func (e *Engine) checkOptions(kind string, raw json.RawMessage, secret notifytype.Secret, connID int64) ([]byte, error) {
	var opts any
	switch kind {
	case KindGotify:
		o, err := gotify.ParseOptions(raw)
		if err != nil {
			return nil, err
		}
		opts = o
	case KindApprise:
		o, err := apprise.ParseOptions(raw)
		if err != nil {
			return nil, err
		}
		as, err := apprise.ParseSecret(secret.Reveal())
		if err != nil {
			return nil, fmt.Errorf("error reading connection %d: its stored Apprise secret does not parse", connID)
		}
		switch {
		case o.Stateful() && len(as.URLs) > 0:
			return nil, notifytype.InvalidArgument("options.config_key", "set either options.config_key or Apprise URLs in the connection's secret, not both")
		case !o.Stateful() && len(as.URLs) == 0:
			return nil, notifytype.InvalidArgument("options.config_key", "set options.config_key, or use a connection whose secret carries Apprise URLs")
		case !o.Stateful():
			if err := apprise.CheckSchemes(as.URLs, e.cfg.AppriseSchemesAllowed); err != nil {
				return nil, redacted(err, "options", secret.Reveal())
			}
		}
		opts = o
	default:
		return nil, notifytype.InvalidArgument("kind", "must be gotify or apprise")
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("error encoding sink options: %w", err)
	}
	return b, nil
}

// checkBudget keeps a sink's budget within the operator's bounds (D8).
func (e *Engine) checkBudget(perHour, burst int) error {
	c := e.cfg
	if perHour < c.BudgetPerHourMin || perHour > c.BudgetPerHourMax {
		return notifytype.InvalidArgumentf("budget_per_hour", "must be from %d to %d messages per hour", c.BudgetPerHourMin, c.BudgetPerHourMax)
	}
	if burst < c.BudgetBurstMin || burst > c.BudgetBurstMax {
		return notifytype.InvalidArgumentf("budget_burst", "must be from %d to %d messages", c.BudgetBurstMin, c.BudgetBurstMax)
	}
	return nil
}

// clampDefault keeps a default budget inside operator bounds that exclude
// it.
func clampDefault(def, lo, hi int) int { return min(max(def, lo), hi) }

func nameTaken(err error) error {
	if errors.Is(err, store.ErrSinkNameTaken) {
		return notifytype.InvalidArgument("name", "a sink with this name already exists in this owner scope")
	}
	return err
}
