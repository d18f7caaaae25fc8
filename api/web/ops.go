package web

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"

	"github.com/switchboard/notify/engine"
)

// opsRow is one sink actor of this instance, as the ops page shows it.
type opsRow struct {
	engine.ActorStatus
	TokensText string
}

// opsPage is the actors table, scoped as D26 says: an operator sees every
// sink actor of the instance, any other human those of their own scopes'
// sinks only.
func (s *server) opsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	status := s.d.Engine.Status()
	operator, err := s.d.Accounts.IsOperator(r.Context(), a.P.HumanID)
	if err == nil && !operator {
		status, err = s.d.Engine.StatusFor(r.Context(), a.P)
	}
	if err != nil {
		s.fail(w, r, a, err)
		return
	}
	slices.SortFunc(status, func(x, y engine.ActorStatus) int { return cmp.Compare(x.SinkID, y.SinkID) })
	rows := make([]opsRow, len(status))
	for i, st := range status {
		rows[i] = opsRow{ActorStatus: st, TokensText: strconv.FormatFloat(st.Tokens, 'f', 1, 64)}
	}
	s.render(w, r, http.StatusOK, "ops", a, view{Title: "Ops: sink actors", Nav: "ops", Data: rows})
}
