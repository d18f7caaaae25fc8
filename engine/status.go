package engine

import (
	"context"
	"time"

	"github.com/switchboard/notify/actors"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
)

// SinkStatus is what one sink's actor on this instance is doing: a sink
// with no active actor here (nothing to deliver lately) has none.
type SinkStatus struct {
	SinkID int64 `json:"sink_id"`
	// State is idle, delivering, holding (its budget is spent: rows wait
	// for tokens) or stopped.
	State string `json:"state"`
	// Tokens is what is left of the sink's budget (D8).
	Tokens float64 `json:"tokens"`
	// Held is how many rows wait for the budget; Queued how many claimed
	// rows wait for the actor; InFlight the attempts under way (0 or 1).
	Held     int `json:"held"`
	Queued   int `json:"queued"`
	InFlight int `json:"in_flight"`
	// NextWake is when the actor next looks again (a retry, the budget's
	// return); zero when it waits for nothing.
	NextWake time.Time `json:"next_wake,omitzero"`
	// LastClass is the error class of the last failed attempt, "" for none.
	LastClass notifytype.ErrorClass `json:"last_error_class,omitempty"`
	// Restarts is how often the actor was restarted after a panic.
	Restarts int `json:"restarts"`
	// Delivered is how many attempts the actor made.
	Delivered int64 `json:"attempts"`
}

// The states of SinkStatus.State.
const (
	SinkIdle       = "idle"
	SinkDelivering = "delivering"
	SinkHolding    = "holding"
	SinkStopped    = "stopped"
)

// The sink actors give back their queued rows within actors.ReleaseTimeout,
// which ReleaseTimeout documents: the two must not drift apart (a
// difference either way overflows the unsigned constant below and stops the
// build).
const _ = uint64(ReleaseTimeout-actors.ReleaseTimeout) + uint64(actors.ReleaseTimeout-ReleaseTimeout)

func sinkStatusOut(s actors.Status) SinkStatus {
	return SinkStatus{
		SinkID: s.SinkID, State: string(s.State), Tokens: s.Tokens, Held: s.Held, Queued: s.Queued,
		InFlight: s.InFlight, NextWake: s.NextWake, LastClass: s.LastClass, Restarts: s.Restarts,
		Delivered: s.Delivered,
	}
}

func sinkStatusesOut(all []actors.Status) []SinkStatus {
	out := make([]SinkStatus, len(all))
	for i, s := range all {
		out[i] = sinkStatusOut(s)
	}
	return out
}

// AllSinkStatuses returns the status of every active sink actor of this
// instance, by sink id, whoever owns the sink: the operator's view (metrics,
// the ops page of an operator). It never blocks an actor. It costs O(every
// active actor); for one principal's view use SinkStatuses.
func (e *Engine) AllSinkStatuses() []SinkStatus { return sinkStatusesOut(e.actors.Status()) }

// sinkStatusesOf returns the status of the active sink actors of sinkIDs
// only, by sink id, each once; a sink with no active actor on this
// instance is left out. It looks each id up: O(len(sinkIDs)), whatever the
// number of actors. It never blocks an actor, and checks no permission.
func (e *Engine) sinkStatusesOf(sinkIDs ...int64) []SinkStatus {
	return sinkStatusesOut(e.actors.StatusOf(sinkIDs...))
}

// TeamLister is a Directory that can also list the teams a human belongs
// to. When Config.Directory offers it, SinkStatuses lists the sinks of the
// principal's scopes from the database (indexed by owner) and reads only
// their actors, so its cost is that of the principal's sinks; otherwise it
// reads every active actor and filters them. The reference host's
// Directory offers it.
type TeamLister interface {
	// MemberTeams returns the ids of the teams the human is a member of,
	// in any role.
	MemberTeams(ctx context.Context, humanID string) ([]string, error)
}

// SinkStatuses returns the status of the active sink actors of the sinks p
// may read: a human's own scope's and their teams' (D26); an endpoint's,
// its own scope's when its grant has the notifications verbs. Nobody learns
// this way that another scope's sink exists (AllSinkStatuses, the
// instance-wide view, is for operators only). With a TeamLister Directory
// it costs O(p's sinks), not O(every actor).
func (e *Engine) SinkStatuses(ctx context.Context, p Principal) ([]SinkStatus, error) {
	lister, ok := e.cfg.Directory.(TeamLister)
	if !ok {
		return e.statusFiltered(ctx, p)
	}
	scopes, err := e.readableScopes(ctx, p, lister)
	if err != nil {
		return nil, wrapErr(err, "reading actor status")
	}
	if len(scopes) == 0 {
		return []SinkStatus{}, nil
	}
	ids, err := store.SinkIDsOf(ctx, e.cfg.Pool, scopes)
	if err != nil {
		return nil, wrapErr(err, "reading actor status")
	}
	return e.sinkStatusesOf(ids...), nil
}
