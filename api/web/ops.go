package web

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/engine/history"
	"github.com/switchboard/notify/host/hostid"
)

// opsRow is one sink actor of this instance, as the ops page shows it.
type opsRow struct {
	engine.SinkStatus
	// SinkName is the sink's name when it is one of the viewer's own
	// sinks; an operator sees other owners' sinks by id only (D26).
	SinkName string
	// SendsLeft is how many messages the sink's budget lets it send right
	// away (its whole tokens), in words.
	SendsLeft string
}

// opsSinkRow is one sink of the viewer's scopes: its last delivery state
// from the database, beside its live actor when one runs here.
type opsSinkRow struct {
	Sink   engine.Sink
	Owner  string
	Actor  *opsRow
	Last   *engine.DeliveryRecord
	Active bool // an actor of this instance runs for it
}

type opsData struct {
	Actors []opsRow
	Sinks  []opsSinkRow
}

// opsPage shows the sink actors (sink ids and counts only), and the sinks of the viewer's own scopes with their last
// delivery state read from the database, so a sink whose idle actor was
// retired still shows how it last did.
func (s *server) opsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	// The actors are scoped as D26 says: an operator sees every sink actor
	// of the instance, any other human those of their own scopes' sinks.
	var status []engine.SinkStatus
	operator, err := s.d.Accounts.IsOperator(r.Context(), hostid.Number(a.P.HumanID))
	switch {
	case err == nil && operator:
		status = s.d.Engine.AllSinkStatuses()
	case err == nil:
		status, err = s.d.Engine.SinkStatuses(r.Context(), a.P)
	}
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	slices.SortFunc(status, func(x, y engine.SinkStatus) int { return cmp.Compare(x.SinkID, y.SinkID) })
	data := opsData{Actors: make([]opsRow, len(status))}
	for i, st := range status {
		n := int(st.Tokens)
		left := strconv.Itoa(n) + " messages"
		if n == 1 {
			left = "1 message"
		}
		data.Actors[i] = opsRow{SinkStatus: st, SendsLeft: left}
	}
	scopes, err := s.scopeOptions(r.Context(), a)
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	for _, sc := range scopes {
		sinks, err := s.d.Engine.ListSinks(r.Context(), a.P, sc.Scope)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		last, err := history.LastDeliveries(r.Context(), s.d.Engine, a.P, sc.Scope)
		if err != nil {
			s.fail(w, r, a, err)
			return
		}
		for _, sk := range sinks {
			row := opsSinkRow{Sink: sk, Owner: sc.Label}
			if d, ok := last[sk.ID]; ok {
				row.Last = &d
			}
			if i := slices.IndexFunc(data.Actors, func(x opsRow) bool { return x.SinkID == sk.ID }); i >= 0 {
				row.Actor, row.Active = &data.Actors[i], true
				data.Actors[i].SinkName = sk.Name
			}
			data.Sinks = append(data.Sinks, row)
		}
	}
	s.render(w, r, http.StatusOK, "ops", a, view{Title: "Ops: how your sinks are doing", Nav: "ops", Data: data})
}
