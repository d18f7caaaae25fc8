package engine

import (
	"sync"

	"github.com/switchboard/notify/store"
)

// handedRows are the rows this instance has handed to its actors (or
// claimed for a coalesced message) and whose outcome it has not written
// yet, each with the token of the claim its copy carries.
//
// A row's claim can expire while its copy still waits in a mailbox or is
// being sent (a slow sink ahead of it), and this instance's own claimer
// may then take the row again. It must not hand over a second copy: the
// two would be sent twice, and the first one's outcome could no longer be
// written. So its claims leave the handed rows alone, whoever holds them
// (store.ClaimParams.Handed): another instance that took such a row over
// and let its claim expire in turn has it taken over by anyone but this
// instance, until this copy's outcome is written. Should one come back
// from an expired claim all the same (store.OutboxRow.TakenFrom: handed
// after the claim read the list), the claimer gives the row back the
// claim its copy carries (store.RestoreClaim) rather than hand it over
// again. That is a safety net and no more: a copy ending while the token
// is given back has its outcome refused under the new token, and leaves
// the row claimed with no copy until the claim expires.
//
// A row is forgotten only once its outcome is committed (or it was given
// back), so a claim can take it pending, due again, in between: a failed
// attempt whose retry was already due. That copy has ended; the claim's
// copy replaces it (set) and goes to the actor in its turn. Given the old
// token back instead, the row would stay claimed with no copy to send it
// until its claim expired, and the sink's later rows would go out before
// it: the order within one instance broken.
type handedRows struct {
	mu     sync.Mutex
	tokens map[int64]int64
}

func newHandedRows() *handedRows { return &handedRows{tokens: map[int64]int64{}} }

// hand records that row goes to an actor. It returns false, with the
// token of the copy already handed, when the row is handed already.
func (h *handedRows) hand(row store.OutboxRow) (prev int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, held := h.tokens[row.ID]; held {
		return t, false
	}
	h.tokens[row.ID] = row.ClaimToken
	return 0, true
}

// set records that row is in flight under its claim's token, whatever
// was recorded of it before (the rows of a coalesced message, claimed
// from held; a row claimed again pending before its ended copy was
// forgotten). The ended copy's done then leaves the new copy's entry.
func (h *handedRows) set(row store.OutboxRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokens[row.ID] = row.ClaimToken
}

// done forgets rows whose outcome is written, given back or given up.
func (h *handedRows) done(rows ...store.Claimed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rows {
		if h.tokens[r.ID] == r.Token {
			delete(h.tokens, r.ID)
		}
	}
}

// ids lists the rows handed.
func (h *handedRows) ids() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]int64, 0, len(h.tokens))
	for id := range h.tokens {
		out = append(out, id)
	}
	return out
}
