package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store"
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

func ruleOut(r store.RuleRow) Rule {
	return Rule{
		ID: r.ID, WebhookID: r.WebhookID, Position: r.Position, Name: r.Name, Expr: r.Expr,
		Action: RuleAction{
			Queue: r.QueueID, Drop: r.Drop, Notify: r.Notify, NotifySeverity: notifytype.Severity(r.NotifySeverity),
		},
		UpdatedAt: r.UpdatedAt, UpdatedByHumanID: r.UpdatedByHumanID, UpdatedByEndpointID: r.UpdatedByEndpointID,
	}
}

// compileExpr checks, rewrites and compiles a jq expression (rulecheck.go):
// only the checked subset of jq is accepted, and every value the compiled
// code builds is paid for out of its run's budget. The compiled code sees
// no environment variables and has no input iterator, so an expression can
// read only the delivery it is given.
func compileExpr(expr string) (*gojq.Code, error) {
	q, err := checkExpr(expr)
	if err != nil {
		return nil, err
	}
	rewriteQuery(q)
	opts := append([]gojq.CompilerOption{
		gojq.WithEnvironLoader(func() []string { return nil }),
		gojq.WithVariables([]string{budgetVar}),
	}, ruleFuncs...)
	return gojq.Compile(q, opts...)
}

// errRulesBudget is the fault of a rule the rules' time budget stopped.
var errRulesBudget = errors.New("stopped: the rules' time budget ran out")

// runExpr runs code on v for at most timeout, with a fresh work budget, and
// returns its first output; ok is false when it produced none. A ctx that
// ends first (the rules' time budget) stops it too.
func runExpr(ctx context.Context, code *gojq.Code, v any, timeout time.Duration) (out any, ok bool, err error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	iter := code.RunWithContext(runCtx, v, &workBudget{left: RuleWorkBudget})
	out, ok = iter.Next()
	if !ok {
		return nil, false, nil
	}
	if e, isErr := out.(error); isErr {
		if errors.Is(e, context.DeadlineExceeded) {
			if ctx.Err() != nil {
				return nil, false, errRulesBudget
			}
			return nil, false, fmt.Errorf("ran longer than %v", timeout)
		}
		var halt *gojq.HaltError
		if errors.As(e, &halt) && halt.Value() == nil {
			return nil, false, nil
		}
		return nil, false, e
	}
	return out, true, nil
}

// truthy is jq's truth: anything but false and null.
func truthy(v any) bool { return v != nil && v != false }

// checkedRule is a rule input that passed the checks that need no database.
type checkedRule struct {
	in   RuleInput
	code *gojq.Code
}

// ruleRef names a rule in errors: its name, else its place.
func ruleRef(name string, i int) string {
	if name != "" {
		return strconv.Quote(name)
	}
	return "#" + strconv.Itoa(i+1)
}

// checkRule checks what a rule says without the database. field prefixes
// the error's field ("rules[2]." for a list, "" for one rule); every
// message names the rule.
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
	code, err := compileExpr(in.Expr)
	var notAllowed *notAllowedError
	switch {
	case errors.As(err, &notAllowed):
		return checkedRule{}, bad("expr", "its expression %s", notAllowed.Error())
	case err != nil:
		return checkedRule{}, bad("expr", "its expression does not compile: %s", firstLine(err.Error()))
	}
	return checkedRule{in: in, code: code}, nil
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
func checkRulesInScope(ctx context.Context, db store.DBTX, owner string, rules []checkedRule, field func(i int) string) error {
	var names []string
	for _, r := range rules {
		if r.in.Action.Notify != "" {
			names = append(names, r.in.Action.Notify)
		}
	}
	sinks, err := store.SinksByName(ctx, db, owner, names, false)
	if err != nil {
		return err
	}
	for i, r := range rules {
		ref := ruleRef(r.in.Name, i)
		if q := r.in.Action.Queue; q != 0 {
			ok, err := store.QueueRoutable(ctx, db, q, owner)
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

// compiledRule is a saved rule ready to run.
type compiledRule struct {
	row  store.RuleRow
	code *gojq.Code // nil when the stored expression no longer compiles
	err  error
}

// ruleCache keeps compiled expressions by rule id, valid while the rule's
// expression is unchanged, so a delivery does not recompile its webhook's
// rules.
type ruleCache struct {
	mu sync.Mutex
	m  map[int64]compiledRule
}

const ruleCacheMax = 10_000

func (c *ruleCache) compile(rows []store.RuleRow) []compiledRule {
	out := make([]compiledRule, len(rows))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > ruleCacheMax {
		c.m = map[int64]compiledRule{}
	}
	for i, r := range rows {
		if hit, ok := c.m[r.ID]; ok && hit.row.Expr == r.Expr {
			hit.row = r
			out[i] = hit
			continue
		}
		code, err := compileExpr(r.Expr)
		cr := compiledRule{row: r, code: code, err: err}
		c.m[r.ID] = cr
		out[i] = cr
	}
	return out
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

// evaluate runs every rule on payload (D17): all rules run; the first
// match with queue or drop decides routing; the notify of every matching
// rule is collected, once per sink. A rule that faults does not match. Each
// rule runs for at most timeout and all of them together until ctx ends
// (the rules' time budget): a rule reached after that is a fault, not run.
func evaluate(ctx context.Context, rules []compiledRule, payload any, timeout time.Duration) evaluation {
	ev := evaluation{decider: -1, results: make([]RuleResult, len(rules))}
	seen := map[string]bool{}
	for i, r := range rules {
		res := RuleResult{RuleID: r.row.ID, Name: r.row.Name}
		var notAllowed *notAllowedError
		switch {
		case errors.As(r.err, &notAllowed):
			res.Fault = "expression uses " + notAllowed.what + ", not allowed in rules (a checked subset of jq); not run"
		case r.err != nil:
			res.Fault = "expression does not compile: " + firstLine(r.err.Error())
		case ctx.Err() != nil:
			res.Fault = "not run: the rules' time budget ran out"
		default:
			out, ok, err := runExpr(ctx, r.code, payload, timeout)
			switch {
			case err != nil:
				res.Fault = "expression failed: " + firstLine(err.Error())
			case ok && truthy(out):
				res.Matched = true
			}
		}
		if res.Matched {
			if ev.decider < 0 && (r.row.QueueID != 0 || r.row.Drop) {
				ev.decider = i
				res.Decided = true
			}
			if n := r.row.Notify; n != "" && !seen[n] {
				seen[n] = true
				sev := notifytype.Severity(r.row.NotifySeverity)
				if sev == "" {
					sev = notifytype.SeverityNormal
				}
				ev.notify = append(ev.notify, NotifyRequest{Sink: n, RuleID: r.row.ID, Rule: r.row.Name, Severity: sev})
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
