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

// opsPage is the actors table from the engine's Status: any signed-in
// human may see it, since it shows sink ids and counts only, no tenant's
// names, messages or settings.
func (s *server) opsPage(w http.ResponseWriter, r *http.Request, a *actor) {
	status := s.d.Engine.Status()
	slices.SortFunc(status, func(x, y engine.ActorStatus) int { return cmp.Compare(x.SinkID, y.SinkID) })
	rows := make([]opsRow, len(status))
	for i, st := range status {
		rows[i] = opsRow{ActorStatus: st, TokensText: strconv.FormatFloat(st.Tokens, 'f', 1, 64)}
	}
	s.render(w, r, http.StatusOK, "ops", a, view{Title: "Ops: sink actors", Nav: "ops", Data: rows})
}
