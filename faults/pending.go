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
// is the run to make once the features below are on main.
const PendingEnv = "SWITCHBOARD_FAULTS_PENDING"

// pendingChecks are the checks that wait on a feature not yet on main,
// with the reason. A pending check still runs: when it fails, its row says
// "pending: <id>: <reason>" and the test passes; when it passes, the row
// says so, and the id should leave this list. Nothing is skipped silently.
var pendingChecks = map[string]string{
	"crash/abandoned-records":        "D25 `abandoned` class (h-delivery): an unknown outcome is recorded `failed` today",
	"crash/claim-ttl-setting":        "D27 SWITCHBOARD_CLAIM_TTL (h-security): the binary claims for the 2 min default today",
	"sinkfaults/retry-after":         "D24 (h-delivery): Retry-After may push a retry past its D10 slot today",
	"sinkfaults/panic-abandoned":     "D25 `abandoned` class (h-delivery) and an exported adapter hook: a panicking adapter's attempt is recorded `failed` today",
	"ssrf/numeric-spellings-blocked": "defect found by this suite, for the integrator: a sink URL naming an IPv4 address in decimal, octal or short form is accepted at save time and each attempt ends `network` (retried 7 times) instead of `blocked`; it never reaches the address",
	"dbrestart/digest-scheduler":     "the digest scheduler (issue 9, digests branch) is not on main",
	"surface/hooks-load":             "/hooks/{id} (issue 8, webhooks branch) is not on main",
	"surface/fuzz-schedule":          "the schedule parser fuzzer comes with the digests branch (issue 9)",
	"surface/fuzz-rules":             "the rule expression fuzzer comes with the webhooks branch (issue 8)",
}

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

// Pending collects what a scenario's pending checks found, for its row.
type Pending struct {
	mu    sync.Mutex
	notes []string
}

// Expect checks ok for check id. A failed strict check fails t with the
// message; a failed pending check is noted "pending: <id>: <reason> (<message>)"
// instead; a pending check that passes is noted too, so the list is kept
// short.
func (p *Pending) Expect(t testing.TB, id string, ok bool, format string, args ...any) bool {
	t.Helper()
	reason := PendingReason(id)
	msg := fmt.Sprintf(format, args...)
	switch {
	case ok && reason != "":
		p.add(fmt.Sprintf("pending check %s now passes: take it off %s", id, PendingEnv))
	case !ok && reason == "":
		t.Errorf("%s: %s", id, msg)
	case !ok:
		p.add(fmt.Sprintf("pending: %s: %s (%s)", id, reason, msg))
		t.Logf("pending check %s failed as expected until it lands: %s", id, msg)
	}
	return ok
}

// Note records a feature the scenario cannot exercise at all yet (no code
// to call on main). Taken off the pending list, it fails t: the scenario
// must then be written.
func (p *Pending) Note(t testing.TB, id string) {
	t.Helper()
	reason := PendingReason(id)
	if reason == "" {
		t.Errorf("%s: not exercised by the suite, and no longer pending", id)
		return
	}
	p.add(fmt.Sprintf("pending: %s: %s", id, reason))
}

func (p *Pending) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, s)
}

// Notes returns what was collected.
func (p *Pending) Notes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.notes...)
}
