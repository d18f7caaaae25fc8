package faults

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// PendingEnv is SWITCHBOARD_FAULTS_PENDING: when set, it replaces the
// built-in list of pending checks (pendingChecks) with the comma-separated
// check ids it names; "none" empties it, so every check is strict:
//
//	SWITCHBOARD_FAULTS_PENDING=none make faults
//
// The built-in list is empty: every check of the suite is strict. Naming
// a check here marks it pending for one run (a defect the integrator has
// yet to decide on, say) without editing the code.
const PendingEnv = "SWITCHBOARD_FAULTS_PENDING"

// pendingChecks are the checks that wait on a feature not yet on main,
// with the reason. A pending check still runs: when it fails, its row says
// "pending: <id>: <reason>" and the test passes; when it passes, the row
// says so, and the id should leave this list. Nothing is skipped silently.
// Empty since every check's feature landed and the suite exercises it
// (docs/RELIABILITY.md).
var pendingChecks = map[string]string{}

var (
	pendingOnce sync.Once
	pendingList map[string]string
)

// PendingReason returns why check id is pending, or "" when it is strict.
func PendingReason(id string) string {
	pendingOnce.Do(func() {
		v, set := os.LookupEnv(PendingEnv)
		if !set {
			pendingList = pendingChecks
			return
		}
		pendingList = map[string]string{}
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" && f != "none" {
				pendingList[f] = "listed in " + PendingEnv
			}
		}
	})
	return pendingList[id]
}

// Pending collects what a scenario's pending checks found, for its row:
// one note per check, however often it ran.
type Pending struct {
	mu     sync.Mutex
	order  []string
	failed map[string][]string // check id → what failed
	passed map[string]bool
}

// Expect checks ok for check id. A failed strict check fails t with the
// message; a failed pending check is noted "pending: <id>: <reason>
// (<messages>)" instead; a pending check that only ever passes is noted as
// ready to leave the list.
func (p *Pending) Expect(t testing.TB, id string, ok bool, format string, args ...any) bool {
	t.Helper()
	reason := PendingReason(id)
	msg := fmt.Sprintf(format, args...)
	switch {
	case ok && reason != "":
		p.record(id, "", true)
	case !ok && reason == "":
		t.Errorf("%s: %s", id, msg)
	case !ok:
		p.record(id, msg, false)
		t.Logf("pending check %s failed as expected until it lands: %s", id, msg)
	}
	return ok
}

// Note records a feature the scenario cannot exercise at all yet (no code
// to call on main). Taken off the pending list, it fails t: the scenario
// must then be written.
func (p *Pending) Note(t testing.TB, id string) {
	t.Helper()
	if PendingReason(id) == "" {
		t.Errorf("%s: not exercised by the suite, and no longer pending", id)
		return
	}
	p.record(id, "not exercised yet", false)
}

func (p *Pending) record(id, msg string, passed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed, p.passed = map[string][]string{}, map[string]bool{}
	}
	if _, seen := p.failed[id]; !seen && !p.passed[id] {
		p.order = append(p.order, id)
	}
	if passed {
		p.passed[id] = true
		return
	}
	p.failed[id] = append(p.failed[id], msg)
}

// Notes returns one line per pending check that ran.
func (p *Pending) Notes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, id := range p.order {
		msgs := p.failed[id]
		if len(msgs) == 0 {
			out = append(out, fmt.Sprintf("pending check %s now passes: take it off %s", id, PendingEnv))
			continue
		}
		shown := msgs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(msgs)-3))
		}
		out = append(out, fmt.Sprintf("pending: %s: %s (%s)", id, PendingReason(id), strings.Join(shown, "; ")))
	}
	return out
}
