package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/host/rulesandbox"
	"github.com/switchboard/notify/notifytype"
)

// Bounds of routing rules (D17).
const (
	// RulesMax is the most rules one webhook may have.
	RulesMax = 50
	// RuleNameMaxLen bounds a rule's name, in characters.
	RuleNameMaxLen = 100
	// RuleExprMaxLen bounds a rule's jq expression, in bytes.
	RuleExprMaxLen = 4096
	// RuleTimeoutDefault is how long one expression may run on one
	// delivery before it counts as a fault.
	RuleTimeoutDefault = 250 * time.Millisecond
	// RulesBudgetDefault is how long one evaluation of a webhook's rules
	// (one delivery's, or a whole dry run's) may take; rules past it are
	// faults, not run.
	RulesBudgetDefault = time.Second
)

// RuleAction is what a matching rule does (D17, REQ-8). Queue and Drop
// decide routing (at most one of them); Notify names a sink of the
// webhook's owner scope and composes with either, or stands alone.
type RuleAction struct {
	// Queue is the queue a match routes the delivery to, as a new todo; 0
	// for none. It is a queue of the webhook's owner scope, or one whose
	// owner befriended that scope.
	Queue int64 `json:"queue,omitempty"`
	// Drop drops a matching delivery: no todo.
	Drop bool `json:"drop,omitempty"`
	// Notify is the name of a sink to notify with rule.notify; "" for none.
	Notify string `json:"notify,omitempty"`
	// NotifySeverity is the rule.notify's severity. Defaults to normal.
	NotifySeverity notifytype.Severity `json:"notify_severity,omitempty"`
}

// RuleInput is a rule as a caller writes it.
type RuleInput struct {
	// Name says what the rule is for. Required, at most 100 characters.
	Name string `json:"name"`
	// Expr is a jq expression run on the delivery's JSON payload; the
	// rule matches when its first output is neither false nor null.
	// Required, at most 4096 bytes.
	Expr   string     `json:"expr"`
	Action RuleAction `json:"action"`
}

// Rule is a saved rule.
type Rule struct {
	ID        int64      `json:"id"`
	WebhookID int64      `json:"webhook_id"`
	Position  int        `json:"position"`
	Name      string     `json:"name"`
	Expr      string     `json:"expr"`
	Action    RuleAction `json:"action"`
	UpdatedAt time.Time  `json:"updated_at"`
	// UpdatedByHumanID and UpdatedByEndpointID record the last writer (an
	// endpoint's write records its accountable human too).
	UpdatedByHumanID    int64 `json:"updated_by_human_id,omitempty"`
	UpdatedByEndpointID int64 `json:"updated_by_endpoint_id,omitempty"`
}

func ruleOut(r hoststore.RuleRow) Rule {
	return Rule{
		ID: r.ID, WebhookID: r.WebhookID, Position: r.Position, Name: r.Name, Expr: r.Expr,
		Action: RuleAction{
			Queue: r.QueueID, Drop: r.Drop, Notify: r.Notify, NotifySeverity: notifytype.Severity(r.NotifySeverity),
		},
		UpdatedAt: r.UpdatedAt, UpdatedByHumanID: r.UpdatedByHumanID, UpdatedByEndpointID: r.UpdatedByEndpointID,
	}
}

// checkedRule is a rule input that passed the checks that need neither
// the database nor a rule worker.
type checkedRule struct {
	in RuleInput
}

// ruleRef names a rule in errors: its name, else its place.
func ruleRef(name string, i int) string {
	if name != "" {
		return strconv.Quote(name)
	}
	return "#" + strconv.Itoa(i+1)
}

// checkRule checks what a rule says without the database and without
// compiling its expression (compileRules does that, in a rule worker, once
// the caller is known to own the webhook). field prefixes the error's field
// ("rules[2]." for a list, "" for one rule); every message names the rule.
func checkRule(in RuleInput, i int, field string) (checkedRule, error) {
	in.Name = strings.TrimSpace(in.Name)
	in.Action.Notify = strings.TrimSpace(in.Action.Notify)
	ref := ruleRef(in.Name, i)
	bad := func(f, format string, args ...any) error {
		return notifytype.InvalidArgument(field+f, "rule "+ref+": "+fmt.Sprintf(format, args...))
	}
	switch {
	case in.Name == "":
		return checkedRule{}, bad("name", "needs a name")
	case utf8.RuneCountInString(in.Name) > RuleNameMaxLen || !utf8.ValidString(in.Name) ||
		strings.ContainsFunc(in.Name, unicode.IsControl) || strings.ContainsFunc(in.Name, isBidiControl):
		return checkedRule{}, bad("name", "its name must be 1 to %d printable characters", RuleNameMaxLen)
	case strings.TrimSpace(in.Expr) == "":
		return checkedRule{}, bad("expr", "needs an expression")
	case len(in.Expr) > RuleExprMaxLen || !utf8.ValidString(in.Expr) || strings.ContainsRune(in.Expr, 0):
		return checkedRule{}, bad("expr", "its expression must be valid UTF-8 of at most %d bytes, without NUL", RuleExprMaxLen)
	case utf8.RuneCountInString(in.Action.Notify) > 64 || !utf8.ValidString(in.Action.Notify) ||
		strings.ContainsFunc(in.Action.Notify, unicode.IsControl):
		return checkedRule{}, bad("action.notify", "notify must be a sink name of 1 to 64 printable characters")
	case in.Action.Queue < 0:
		return checkedRule{}, bad("action.queue", "queue must be a queue id")
	case in.Action.Queue != 0 && in.Action.Drop:
		return checkedRule{}, bad("action", "routes to a queue or drops, not both")
	case in.Action.Queue == 0 && !in.Action.Drop && in.Action.Notify == "":
		return checkedRule{}, bad("action", "does nothing: give queue, drop or notify")
	case in.Action.NotifySeverity != "" && in.Action.Notify == "":
		return checkedRule{}, bad("action.notify_severity", "notify_severity needs notify")
	case in.Action.NotifySeverity != "" && !in.Action.NotifySeverity.Valid():
		return checkedRule{}, bad("action.notify_severity", "notify_severity must be low, normal or high")
	}
	return checkedRule{in: in}, nil
}

// compileRules compiles the rules' expressions in a rule worker, for the
// webhook's owner: the first that does not compile (outside the checked
// subset, a compile error, or past the worker's limits while compiling) is
// invalid_argument naming the rule. Call it after the caller's right to
// the webhook is checked, never before: compiling may cost up to the
// worker's limits.
func (s *Webhooks) compileRules(ctx context.Context, owner string, rules []checkedRule, field func(i int) string, wall time.Duration) error {
	exprs := make([]string, len(rules))
	for i, r := range rules {
		exprs[i] = r.in.Expr
	}
	// A program's compile limit is CPU time; the wall clock of all of
	// them is bounded too: wall (a save's CompileBudget, or a dry run's
	// answer bound).
	cctx, cancel := context.WithTimeout(ctx, wall)
	defer cancel()
	for i, res := range s.sandbox.Compile(cctx, owner, exprs) {
		if msg := compileFault(res); msg != "" {
			return notifytype.InvalidArgument(field(i)+"expr", "rule "+ruleRef(rules[i].in.Name, i)+": its expression "+msg)
		}
	}
	return ctx.Err()
}

// compileFault says why a compile result is not a program, "" when it is.
func compileFault(res rulesandbox.Result) string {
	switch res.Kind {
	case rulesandbox.NotAllowed:
		return "uses " + res.Detail + ", which is not allowed in rules (rules are a checked subset of jq)"
	case rulesandbox.NoCompile:
		return "does not compile: " + firstLine(res.Detail)
	case rulesandbox.Stopped:
		return "could not be compiled within the rules' limits (" + res.Detail + ")"
	case rulesandbox.NotRun:
		return "was not compiled: " + res.Detail
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}

// isBidiControl reports the Unicode bidirectional controls, which would let
// a name display as something else.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

// checkRulesInScope checks what needs the database: every queue is one the
// webhook's scope may route to, and every notify names a sink of that
// scope (REQ-8: a sink of another scope is as good as none).
func checkRulesInScope(ctx context.Context, db hoststore.DBTX, owner string, rules []checkedRule, field func(i int) string) error {
	var names []string
	for _, r := range rules {
		if r.in.Action.Notify != "" {
			names = append(names, r.in.Action.Notify)
		}
	}
	sinks, err := hoststore.SinksByName(ctx, db, owner, names, false)
	if err != nil {
		return err
	}
	for i, r := range rules {
		ref := ruleRef(r.in.Name, i)
		if q := r.in.Action.Queue; q != 0 {
			ok, err := hoststore.QueueRoutable(ctx, db, q, owner)
			if err != nil {
				return err
			}
			if !ok {
				return notifytype.InvalidArgumentf(field(i)+"action.queue",
					"rule %s: queue %d is not a queue this webhook may route to", ref, q)
			}
		}
		if n := r.in.Action.Notify; n != "" {
			if _, ok := sinks[n]; !ok {
				return notifytype.InvalidArgumentf(field(i)+"action.notify",
					"rule %s: notify names no sink of this webhook's owner scope", ref)
			}
		}
	}
	return nil
}

// RuleResult is one rule's outcome on one delivery, as the trace keeps it.
type RuleResult struct {
	RuleID  int64  `json:"rule_id,omitempty"`
	Name    string `json:"name"`
	Matched bool   `json:"matched"`
	// Decided is true for the first match with queue or drop (D17).
	Decided bool `json:"decided,omitempty"`
	// Fault says why the rule could not be run (a timeout, an error).
	Fault string `json:"fault,omitempty"`
}

// NotifyRequest is a sink a delivery's matching rules ask to notify: the
// first matching rule naming it (at most one per sink, D17).
type NotifyRequest struct {
	Sink     string              `json:"sink"`
	RuleID   int64               `json:"rule_id,omitempty"`
	Rule     string              `json:"rule"`
	Severity notifytype.Severity `json:"severity"`
}

// evaluation is the rules' verdict on one payload, before any database
// effect.
type evaluation struct {
	results []RuleResult
	// decider is the index of the rule that decides routing, -1 for none.
	decider int
	notify  []NotifyRequest
}

// evaluate runs every rule on body, one JSON object, in the webhook
// owner's share of the rule workers (D17): all rules run; the first match
// with queue or drop decides routing; the notify of every matching rule is
// collected, once per sink. A rule that faults does not match. Each rule
// runs for at most timeout (past it, plus the pool's grace, its worker is
// killed) and all of them together until ctx ends (the rules' time
// budget): a rule reached after that is a fault, not run.
func evaluate(ctx context.Context, sb *rulesandbox.Pool, owner string, rows []hoststore.RuleRow, body []byte, timeout time.Duration) evaluation {
	ev := evaluation{decider: -1, results: make([]RuleResult, len(rows))}
	exprs := make([]string, len(rows))
	for i, r := range rows {
		exprs[i] = r.Expr
	}
	outs := sb.Eval(ctx, owner, exprs, body, timeout)
	seen := map[string]bool{}
	for i, r := range rows {
		res := RuleResult{RuleID: r.ID, Name: r.Name}
		switch out := outs[i]; out.Kind {
		case rulesandbox.NotAllowed:
			res.Fault = "expression uses " + out.Detail + ", not allowed in rules (a checked subset of jq); not run"
		case rulesandbox.NoCompile:
			res.Fault = "expression does not compile: " + firstLine(out.Detail)
		case rulesandbox.Failed:
			res.Fault = "expression failed: " + firstLine(out.Detail)
		case rulesandbox.Stopped, rulesandbox.NotRun:
			res.Fault = out.Detail
		default:
			res.Matched = out.Output && out.Truthy
		}
		if res.Matched {
			if ev.decider < 0 && (r.QueueID != 0 || r.Drop) {
				ev.decider = i
				res.Decided = true
			}
			if n := r.Notify; n != "" && !seen[n] {
				seen[n] = true
				sev := notifytype.Severity(r.NotifySeverity)
				if sev == "" {
					sev = notifytype.SeverityNormal
				}
				ev.notify = append(ev.notify, NotifyRequest{Sink: n, RuleID: r.ID, Rule: r.Name, Severity: sev})
			}
		}
		ev.results[i] = res
	}
	return ev
}

// decodePayload reads a delivery body: one JSON object, numbers kept exact.
func decodePayload(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, notifytype.InvalidArgument("body", "must be a JSON object: "+firstLine(err.Error()))
	}
	if dec.More() {
		return nil, notifytype.InvalidArgument("body", "must be one JSON object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, notifytype.InvalidArgument("body", "must be one JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, notifytype.InvalidArgument("body", "must be a JSON object")
	}
	return m, nil
}
