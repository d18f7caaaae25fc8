package rulesandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/itchyny/gojq"
)

// Routing rules (and a webhook's sender and subject expressions) are a
// checked subset of jq (issue 18 item 8). gojq on its own lets one step
// allocate gigabytes (`"x" * 1e9`, `setpath([1e9]; 1)`) and lets one
// expression loop or recurse without end, so an expression is accepted only
// when it is made of the constructs below, and before it is compiled it is
// rewritten so that every value it builds is paid for out of a per-run work
// budget (RuleWorkBudget). Past the budget the expression fails, so the rule
// faults and does not match.
//
// The subset:
//   - paths: `.`, `.a`, `."a"`, `.["a"]`, `.[n]`, `.[n:m]`, `.[]`, `..`,
//     each optionally followed by `?`;
//   - literals (null, true, false, numbers, strings, interpolation
//     "\(...)"), arrays `[...]` and objects `{...}`;
//   - `|`, `,`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `and`, `or`, `//`,
//     `+`, `-`, `*`, `/`, `%`, unary `-`;
//   - `if ... then ... elif ... else ... end`, `try ... catch ...`, `?`,
//     `... as $x | ...` (destructuring included);
//   - the functions in allowedFuncs.
//
// Refused: def, reduce, foreach, label/break, every assignment and update
// operator (=, |=, +=, ...), @formats, import/include, $ENV and $__loc__,
// functions outside allowedFuncs (among them limit, range, repeat, while,
// until, recurse/1+, path, paths, getpath, setpath, delpaths, to_entries'
// inverse with_entries, walk, combinations, splits, sub, gsub, scan,
// implode, explode, fromjson, input, inputs, env, debug, stderr, halt,
// input_filename, the *_by functions, index, rindex and indices), a regular
// expression that is not a string literal, and the "g" regex flag.

// RuleWorkBudget is the work one run of one expression may spend on the
// values it builds, in bytes (roughly: a string costs its length, each
// array element or object entry 16 more, a number 16): 8 MiB. A delivery
// is at most 256 KiB, so anything a rule reads from it fits many times over.
const RuleWorkBudget = 8 << 20

// budgetVar is the variable every rewritten expression pays its work from.
// A user's expression cannot name it: names starting with $__ are refused.
const budgetVar = "$__sb"

// notAllowedError says which construct an expression may not use.
type notAllowedError struct{ what string }

func (e *notAllowedError) Error() string {
	return "uses " + e.what + ", which is not allowed in rules (rules are a checked subset of jq)"
}

// funcKey is a function by name and arity.
type funcKey struct {
	name  string
	arity int
}

// How an allowed function is run.
const (
	funcPlain    = iota // as is: it builds nothing bigger than its input
	funcKeep            // its result is paid for (it copies its input)
	funcMap             // map(f), rewritten as [.[] | f] so that each element is paid for
	funcJoin            // join(sep): paid for before it runs
	funcContains        // contains(x): its comparisons are paid for before it runs
	funcInside          // inside(x): contains, the other way round
	funcRegex           // test, match, capture: the regex and flags must be string literals, without "g"
)

// allowedFuncs is the functions a rule may call.
var allowedFuncs = map[funcKey]int{
	{"empty", 0}: funcPlain, {"error", 0}: funcPlain, {"error", 1}: funcPlain,
	{"not", 0}: funcPlain, {"select", 1}: funcPlain, {"type", 0}: funcPlain,
	{"length", 0}: funcPlain, {"utf8bytelength", 0}: funcPlain,
	{"has", 1}: funcPlain, {"in", 1}: funcPlain,
	{"startswith", 1}: funcPlain, {"endswith", 1}: funcPlain,
	{"ltrimstr", 1}: funcPlain, {"rtrimstr", 1}: funcPlain,
	{"trim", 0}: funcPlain, {"ltrim", 0}: funcPlain, {"rtrim", 0}: funcPlain,
	{"tonumber", 0}: funcPlain, {"toboolean", 0}: funcPlain,
	{"any", 0}: funcPlain, {"any", 1}: funcPlain, {"any", 2}: funcPlain,
	{"all", 0}: funcPlain, {"all", 1}: funcPlain, {"all", 2}: funcPlain,
	{"first", 0}: funcPlain, {"first", 1}: funcPlain,
	{"last", 0}: funcPlain, {"last", 1}: funcPlain,
	{"isempty", 1}: funcPlain, {"recurse", 0}: funcPlain,
	{"values", 0}: funcPlain, {"nulls", 0}: funcPlain, {"strings", 0}: funcPlain,
	{"numbers", 0}: funcPlain, {"booleans", 0}: funcPlain, {"arrays", 0}: funcPlain,
	{"objects", 0}: funcPlain, {"iterables", 0}: funcPlain, {"scalars", 0}: funcPlain,
	{"min", 0}: funcPlain, {"max", 0}: funcPlain,
	{"floor", 0}: funcPlain, {"ceil", 0}: funcPlain, {"round", 0}: funcPlain,
	{"fabs", 0}: funcPlain, {"abs", 0}: funcPlain, {"sqrt", 0}: funcPlain,
	{"isnan", 0}: funcPlain, {"isinfinite", 0}: funcPlain, {"isnormal", 0}: funcPlain,

	{"keys", 0}: funcKeep, {"keys_unsorted", 0}: funcKeep, {"to_entries", 0}: funcKeep,
	{"sort", 0}: funcKeep, {"unique", 0}: funcKeep, {"reverse", 0}: funcKeep,
	{"add", 0}: funcKeep, {"tostring", 0}: funcKeep, {"tojson", 0}: funcKeep,
	{"ascii_downcase", 0}: funcKeep, {"ascii_upcase", 0}: funcKeep, {"split", 1}: funcKeep,

	{"map", 1}: funcMap, {"join", 1}: funcJoin,
	{"contains", 1}: funcContains, {"inside", 1}: funcInside,
	{"test", 1}: funcRegex, {"test", 2}: funcRegex,
	{"match", 1}: funcRegex, {"match", 2}: funcRegex,
	{"capture", 1}: funcRegex, {"capture", 2}: funcRegex,
}

// AllowedRuleFunctions lists the functions a rule may call, as name/arity.
func AllowedRuleFunctions() []string {
	out := make([]string, 0, len(allowedFuncs))
	for k := range allowedFuncs {
		out = append(out, fmt.Sprintf("%s/%d", k.name, k.arity))
	}
	sort.Strings(out)
	return out
}

// checkExpr parses expr and checks it is in the subset; the error is a
// parse error or a *notAllowedError.
func checkExpr(expr string) (*gojq.Query, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, err
	}
	if err := checkQuery(q); err != nil {
		return nil, err
	}
	return q, nil
}

func refuse(format string, args ...any) error {
	return &notAllowedError{what: fmt.Sprintf(format, args...)}
}

func checkQuery(q *gojq.Query) error {
	if q == nil {
		return nil
	}
	switch {
	case q.Meta != nil || len(q.Imports) > 0:
		return refuse("import or module")
	case len(q.FuncDefs) > 0:
		return refuse("def")
	}
	switch q.Op {
	case 0, gojq.OpPipe, gojq.OpComma, gojq.OpAdd, gojq.OpSub, gojq.OpMul, gojq.OpDiv, gojq.OpMod,
		gojq.OpEq, gojq.OpNe, gojq.OpGt, gojq.OpLt, gojq.OpGe, gojq.OpLe, gojq.OpAnd, gojq.OpOr, gojq.OpAlt:
	default:
		return refuse("the assignment %q", q.Op.String())
	}
	if q.Op == gojq.OpMul && (repeatsPastBudget(q.Left, q.Right) || repeatsPastBudget(q.Right, q.Left)) {
		return refuse("a string repeated past the rules' limit")
	}
	for _, p := range q.Patterns {
		if err := checkPattern(p); err != nil {
			return err
		}
	}
	if err := checkTerm(q.Term); err != nil {
		return err
	}
	if err := checkQuery(q.Left); err != nil {
		return err
	}
	return checkQuery(q.Right)
}

func checkVar(name string) error {
	if name == "$ENV" || strings.HasPrefix(name, "$__") {
		return refuse("%s", name)
	}
	return nil
}

func checkPattern(p *gojq.Pattern) error {
	if p == nil {
		return nil
	}
	if p.Name != "" {
		if err := checkVar(p.Name); err != nil {
			return err
		}
	}
	for _, e := range p.Array {
		if err := checkPattern(e); err != nil {
			return err
		}
	}
	for _, o := range p.Object {
		if err := checkVar(o.Key); err != nil {
			return err
		}
		if err := checkString(o.KeyString); err != nil {
			return err
		}
		if err := checkQuery(o.KeyQuery); err != nil {
			return err
		}
		if err := checkPattern(o.Val); err != nil {
			return err
		}
	}
	return nil
}

func checkString(s *gojq.String) error {
	if s == nil {
		return nil
	}
	for _, q := range s.Queries {
		if err := checkQuery(q); err != nil {
			return err
		}
	}
	return nil
}

func checkIndex(x *gojq.Index) error {
	if x == nil {
		return nil
	}
	if err := checkString(x.Str); err != nil {
		return err
	}
	if err := checkQuery(x.Start); err != nil {
		return err
	}
	return checkQuery(x.End)
}

func checkTerm(t *gojq.Term) error {
	if t == nil {
		return nil
	}
	switch t.Type {
	case gojq.TermTypeIdentity, gojq.TermTypeRecurse, gojq.TermTypeNull, gojq.TermTypeTrue,
		gojq.TermTypeFalse, gojq.TermTypeNumber:
	case gojq.TermTypeIndex:
		if err := checkIndex(t.Index); err != nil {
			return err
		}
	case gojq.TermTypeFunc:
		if err := checkFunc(t.Func); err != nil {
			return err
		}
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			if err := checkVar(kv.Key); err != nil {
				return err
			}
			if err := checkString(kv.KeyString); err != nil {
				return err
			}
			if err := checkQuery(kv.KeyQuery); err != nil {
				return err
			}
			if err := checkQuery(kv.Val); err != nil {
				return err
			}
		}
	case gojq.TermTypeArray:
		if err := checkQuery(t.Array.Query); err != nil {
			return err
		}
	case gojq.TermTypeUnary:
		if err := checkTerm(t.Unary.Term); err != nil {
			return err
		}
	case gojq.TermTypeFormat:
		return refuse("the format %s", t.Format)
	case gojq.TermTypeString:
		if err := checkString(t.Str); err != nil {
			return err
		}
	case gojq.TermTypeIf:
		if err := checkQuery(t.If.Cond); err != nil {
			return err
		}
		if err := checkQuery(t.If.Then); err != nil {
			return err
		}
		for _, e := range t.If.Elif {
			if err := checkQuery(e.Cond); err != nil {
				return err
			}
			if err := checkQuery(e.Then); err != nil {
				return err
			}
		}
		if err := checkQuery(t.If.Else); err != nil {
			return err
		}
	case gojq.TermTypeTry:
		if err := checkQuery(t.Try.Body); err != nil {
			return err
		}
		if err := checkQuery(t.Try.Catch); err != nil {
			return err
		}
	case gojq.TermTypeReduce:
		return refuse("reduce")
	case gojq.TermTypeForeach:
		return refuse("foreach")
	case gojq.TermTypeLabel, gojq.TermTypeBreak:
		return refuse("label/break")
	case gojq.TermTypeQuery:
		if err := checkQuery(t.Query); err != nil {
			return err
		}
	default:
		return refuse("an unknown construct")
	}
	for _, s := range t.SuffixList {
		if err := checkIndex(s.Index); err != nil {
			return err
		}
	}
	return nil
}

func checkFunc(f *gojq.Func) error {
	if strings.HasPrefix(f.Name, "$") {
		if len(f.Args) > 0 {
			return refuse("%s with arguments", f.Name)
		}
		return checkVar(f.Name)
	}
	kind, ok := allowedFuncs[funcKey{f.Name, len(f.Args)}]
	if !ok {
		return refuse("%s/%d", f.Name, len(f.Args))
	}
	if kind == funcRegex {
		for i, a := range f.Args {
			s, ok := stringLiteral(a)
			if !ok {
				return refuse("%s with a regular expression or flags that are not a string literal", f.Name)
			}
			if i == 1 {
				if strings.ContainsRune(s, 'g') {
					return refuse("%s with the \"g\" flag", f.Name)
				}
				continue
			}
			if _, err := regexp.Compile(s); err != nil {
				return refuse("%s with an invalid regular expression", f.Name)
			}
		}
		return nil
	}
	for _, a := range f.Args {
		if err := checkQuery(a); err != nil {
			return err
		}
	}
	return nil
}

// repeatsPastBudget reports a literal string times a literal number that
// would build more than a run may (`"x" * 1000000000`): refused at save
// rather than left to fault at every run.
func repeatsPastBudget(str, num *gojq.Query) bool {
	s, ok := stringLiteral(str)
	if !ok || num == nil || num.Term == nil || num.Term.Type != gojq.TermTypeNumber || len(num.Term.SuffixList) > 0 {
		return false
	}
	var n float64
	if _, err := fmt.Sscan(num.Term.Number, &n); err != nil {
		return false
	}
	return float64(max(len(s), 1))*n > RuleWorkBudget
}

// stringLiteral is a query's value when it is a plain string literal.
func stringLiteral(q *gojq.Query) (string, bool) {
	if q == nil || q.Term == nil || q.Term.Type != gojq.TermTypeString || len(q.Term.SuffixList) > 0 ||
		q.Term.Str == nil || len(q.Term.Str.Queries) > 0 {
		return "", false
	}
	return q.Term.Str.Str, true
}

// Rewriting. A checked query is rewritten in place, inside out, so that
// every value it builds passes through one of the functions below with the
// run's budget. The templates' own operators are not rewritten again.

// template parses src, whose _ARG0, _ARG1, ... stand for args.
func template(src string, args ...*gojq.Query) *gojq.Query {
	q, err := gojq.Parse(src)
	if err != nil {
		panic("host: bad rule template " + src + ": " + err.Error())
	}
	fillArgs(q, args)
	return q
}

func fillArgs(q *gojq.Query, args []*gojq.Query) {
	if q == nil {
		return
	}
	for _, p := range q.Patterns {
		_ = p // templates bind plain variables only
	}
	fillTerm(q.Term, args)
	fillArgs(q.Left, args)
	fillArgs(q.Right, args)
}

func fillTerm(t *gojq.Term, args []*gojq.Query) {
	if t == nil {
		return
	}
	switch t.Type {
	case gojq.TermTypeFunc:
		if n, ok := strings.CutPrefix(t.Func.Name, "_ARG"); ok {
			i := int(n[0] - '0')
			*t = gojq.Term{Type: gojq.TermTypeQuery, Query: args[i], SuffixList: t.SuffixList}
			return
		}
		for _, a := range t.Func.Args {
			fillArgs(a, args)
		}
	case gojq.TermTypeArray:
		fillArgs(t.Array.Query, args)
	case gojq.TermTypeQuery:
		fillArgs(t.Query, args)
	}
}

// keepQuery is `q | _sb_keep($__sb)`: q's outputs, each paid for.
func keepQuery(q *gojq.Query) *gojq.Query {
	return template(`_ARG0 | _sb_keep($__sb)`, q)
}

func rewriteQuery(q *gojq.Query) {
	if q == nil {
		return
	}
	rewriteTerm(q.Term)
	for _, p := range q.Patterns {
		rewritePattern(p)
	}
	rewriteQuery(q.Left)
	rewriteQuery(q.Right)
	var op string
	switch q.Op {
	case gojq.OpAdd, gojq.OpSub, gojq.OpMul, gojq.OpDiv, gojq.OpMod:
		op = q.Op.String()
	default:
		return
	}
	// The operands are bound in the order jq evaluates them (the right one
	// outermost), so a rewritten operator yields its outputs in jq's order.
	*q = *template(`_ARG1 as $__r | _ARG0 as $__l | _sb_pre($__l; $__r; "`+op+`"; $__sb) | $__l `+op+` $__r | _sb_keep($__sb)`, q.Left, q.Right)
}

func rewritePattern(p *gojq.Pattern) {
	if p == nil {
		return
	}
	for _, e := range p.Array {
		rewritePattern(e)
	}
	for _, o := range p.Object {
		rewriteString(o.KeyString)
		rewriteQuery(o.KeyQuery)
		rewritePattern(o.Val)
	}
}

func rewriteString(s *gojq.String) {
	if s == nil {
		return
	}
	for i, q := range s.Queries {
		if q.Term != nil && q.Term.Type == gojq.TermTypeString && q.Term.Str != nil && len(q.Term.SuffixList) == 0 {
			continue // a literal part
		}
		rewriteQuery(q)
		// An interpolated value is turned into a string that is paid for
		// (gojq needs each part to be a term).
		s.Queries[i] = &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeQuery, Query: template(`_ARG0 | _sb_str($__sb)`, q)}}
	}
}

func rewriteIndex(x *gojq.Index) {
	if x == nil {
		return
	}
	rewriteString(x.Str)
	rewriteQuery(x.Start)
	rewriteQuery(x.End)
	if x.Start != nil && !x.IsSlice {
		// `.[[1,2]]` searches an array for a sub-array: quadratic in one step.
		x.Start = template(`_ARG0 | _sb_key`, x.Start)
	}
}

func rewriteTerm(t *gojq.Term) {
	if t == nil {
		return
	}
	for _, s := range t.SuffixList {
		rewriteIndex(s.Index)
	}
	wrap := func(q *gojq.Query) {
		*t = gojq.Term{Type: gojq.TermTypeQuery, Query: q, SuffixList: t.SuffixList}
	}
	switch t.Type {
	case gojq.TermTypeIndex:
		rewriteIndex(t.Index)
	case gojq.TermTypeFunc:
		f := t.Func
		for _, a := range f.Args {
			rewriteQuery(a)
		}
		plain := &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: f}}
		switch allowedFuncs[funcKey{f.Name, len(f.Args)}] {
		case funcKeep:
			wrap(keepQuery(plain))
		case funcMap:
			wrap(template(`[.[] | _ARG0 | _sb_keep($__sb)]`, f.Args[0]))
		case funcJoin:
			wrap(template(`_sb_joinpre(_ARG0; $__sb) as [$__a, $__s] | $__a | join($__s) | _sb_keep($__sb)`, f.Args[0]))
		case funcContains:
			wrap(template(`_sb_cpre(_ARG0; $__sb) as [$__a, $__b] | $__a | contains($__b)`, f.Args[0]))
		case funcInside:
			wrap(template(`. as $__i | _ARG0 | _sb_cpre($__i; $__sb) as [$__a, $__b] | $__a | contains($__b)`, f.Args[0]))
		}
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			rewriteString(kv.KeyString)
			rewriteQuery(kv.KeyQuery)
			rewriteQuery(kv.Val)
		}
		wrap(keepQuery(&gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeObject, Object: t.Object}}))
	case gojq.TermTypeArray:
		if t.Array.Query != nil {
			rewriteQuery(t.Array.Query)
			t.Array.Query = keepQuery(t.Array.Query)
		}
	case gojq.TermTypeUnary:
		rewriteTerm(t.Unary.Term)
	case gojq.TermTypeString:
		rewriteString(t.Str)
	case gojq.TermTypeIf:
		rewriteQuery(t.If.Cond)
		rewriteQuery(t.If.Then)
		for _, e := range t.If.Elif {
			rewriteQuery(e.Cond)
			rewriteQuery(e.Then)
		}
		rewriteQuery(t.If.Else)
	case gojq.TermTypeTry:
		rewriteQuery(t.Try.Body)
		rewriteQuery(t.Try.Catch)
	case gojq.TermTypeQuery:
		rewriteQuery(t.Query)
	}
}

// The run's budget.

// workBudget is what one run of one expression may still spend.
type workBudget struct{ left int64 }

// errBudget is the fault of an expression that spent its budget.
var errBudget = fmt.Errorf("built values past the rules' limit of %d MiB of work (a checked subset of jq)", RuleWorkBudget>>20)

func (b *workBudget) pay(n int64) error {
	if n < 0 || n > b.left {
		b.left = 0
		return errBudget
	}
	b.left -= n
	return nil
}

func budgetOf(args []any) *workBudget {
	b, _ := args[len(args)-1].(*workBudget)
	if b == nil {
		// Only a rewritten expression calls these, always with the budget.
		return &workBudget{}
	}
	return b
}

// weigh is v's size in budget units, or more than limit once it is past it.
// A value built from shared parts (`[$a, $a]`) is weighed as if unshared,
// so no value can be bigger, when printed or walked, than what was paid.
func weigh(v any, limit int64) int64 {
	var w int64
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			w += 16 + int64(len(v))
		case json.Number:
			w += 16 + int64(len(v))
		case *big.Int:
			w += 16 + int64(v.BitLen()/8)
		case []any:
			w += 24
			for _, e := range v {
				w += 16
				if w > limit || !walk(e) {
					return false
				}
			}
		case map[string]any:
			w += 48
			for k, e := range v {
				w += 32 + int64(len(k))
				if w > limit || !walk(e) {
					return false
				}
			}
		default:
			w += 16
		}
		return w <= limit
	}
	walk(v)
	return w
}

func mulCapped(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// ruleFuncs are the functions a rewritten expression calls.
var ruleFuncs = []gojq.CompilerOption{
	// _sb_keep($b) pays for its input and returns it.
	gojq.WithFunction("_sb_keep", 1, 1, func(v any, args []any) any {
		b := budgetOf(args)
		if err := b.pay(weigh(v, b.left)); err != nil {
			return err
		}
		return v
	}),
	// _sb_str($b) is its input as interpolation writes it, paid for.
	gojq.WithFunction("_sb_str", 1, 1, func(v any, args []any) any {
		b := budgetOf(args)
		if s, ok := v.(string); ok {
			if err := b.pay(16 + int64(len(s))); err != nil {
				return err
			}
			return s
		}
		if err := b.pay(weigh(v, b.left)); err != nil {
			return err
		}
		out, err := gojq.Marshal(v)
		if err != nil {
			return err
		}
		if err := b.pay(16 + int64(len(out))); err != nil {
			return err
		}
		return string(out)
	}),
	// _sb_pre($l; $r; op; $b) pays, before the operator runs, for what it
	// would build or compare that no later payment would catch in time.
	gojq.WithFunction("_sb_pre", 4, 4, func(_ any, args []any) any {
		b := budgetOf(args)
		l, r, op := args[0], args[1], args[2]
		var cost int64
		switch op {
		case "+":
			// A concatenation is paid for before it is built, so the step
			// that runs out of budget does not build it.
			switch l := l.(type) {
			case string:
				if r, ok := r.(string); ok {
					cost = int64(len(l) + len(r))
				}
			case []any:
				if r, ok := r.([]any); ok {
					cost = 16 * int64(len(l)+len(r))
				}
			}
		case "*":
			s, n := l, r
			if _, ok := s.(string); !ok {
				s, n = r, l
			}
			if str, ok := s.(string); ok {
				if f, ok := gojq.ToFloat64(n); ok && f > 0 {
					c := float64(len(str)) * math.Ceil(f)
					if c > float64(b.left) {
						return b.pay(math.MaxInt64)
					}
					cost = int64(c)
				}
			}
		case "-":
			// Array difference compares every pair.
			la, lok := l.([]any)
			ra, rok := r.([]any)
			if lok && rok && len(la) > 0 && len(ra) > 0 {
				cost = mulCapped(int64(len(ra)), weigh(la, b.left/int64(len(ra))+1))
			}
		}
		if err := b.pay(cost); err != nil {
			return err
		}
		return nil
	}),
	// _sb_joinpre(sep; $b) pays for what join(sep) builds and returns
	// [input, sep].
	gojq.WithFunction("_sb_joinpre", 2, 2, func(v any, args []any) any {
		b := budgetOf(args)
		if xs, ok := v.([]any); ok {
			sep, _ := args[0].(string)
			cost := mulCapped(int64(len(xs)), int64(len(sep))+16)
			for _, x := range xs {
				if s, ok := x.(string); ok {
					cost += int64(len(s))
				} else {
					cost += weigh(x, b.left)
				}
				if cost > b.left {
					break
				}
			}
			if err := b.pay(cost); err != nil {
				return err
			}
		}
		return []any{v, args[0]}
	}),
	// _sb_cpre(x; $b) pays for the comparisons of contains(x) and returns
	// [input, x].
	gojq.WithFunction("_sb_cpre", 2, 2, func(v any, args []any) any {
		b := budgetOf(args)
		if err := b.pay(containsCost(v, args[0], b.left)); err != nil {
			return err
		}
		return []any{v, args[0]}
	}),
	// _sb_key refuses an array as an index: that is a sub-array search.
	gojq.WithFunction("_sb_key", 0, 0, func(v any, _ []any) any {
		if _, ok := v.([]any); ok {
			return errors.New("indexing with an array is not allowed in rules")
		}
		return v
	}),
}

// containsCost bounds the comparisons contains makes of a and b.
func containsCost(a, b any, limit int64) int64 {
	switch b := b.(type) {
	case map[string]any:
		am, ok := a.(map[string]any)
		if !ok {
			return 1
		}
		var c int64
		for k, bv := range b {
			c += 1 + int64(len(k))
			if av, ok := am[k]; ok {
				c += containsCost(av, bv, limit-c)
			}
			if c > limit {
				break
			}
		}
		return c
	case []any:
		if _, ok := a.([]any); !ok {
			return 1
		}
		wb := weigh(b, limit)
		return mulCapped(wb, weigh(a, limit/max(wb, 1)+1))
	case string:
		if as, ok := a.(string); ok {
			return int64(len(as) + len(b))
		}
	}
	return 1
}

// compileExpr checks, rewrites and compiles a jq expression: only the
// checked subset of jq is accepted, and every value the compiled code
// builds is paid for out of its run's budget. The compiled code sees no
// environment variables and has no input iterator, so an expression can
// read only the delivery it is given. It runs only inside a worker
// process (worker.go): the subset is a first filter that gives clear
// messages, the worker's limits are the bound.
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

// compileUnchecked compiles expr as plain gojq, neither checked nor
// rewritten (it still gets the budget variable, which it ignores). Only
// tests ask for it (Request.Unchecked), to show that the worker's limits
// hold for constructs the subset would have refused.
func compileUnchecked(expr string) (*gojq.Code, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, err
	}
	return gojq.Compile(q,
		gojq.WithEnvironLoader(func() []string { return nil }),
		gojq.WithVariables([]string{budgetVar}))
}

// errTimeout is the fault of an expression stopped by its own timeout
// between two steps.
type errTimeout struct{ d time.Duration }

func (e errTimeout) Error() string { return fmt.Sprintf("ran longer than %v", e.d) }

// runExpr runs code on v for at most timeout, with a fresh work budget, and
// returns its first output; ok is false when it produced none.
//
// The timeout counts the CPU time the process uses meanwhile (in a worker,
// which runs one program at a time, the program's), not the wall clock: on
// a loaded machine a program waiting for a core has not run long. The
// parent's wall deadline and the rules' budget bound the wall time.
func runExpr(ctx context.Context, code *gojq.Code, v any, timeout time.Duration) (out any, ok bool, err error) {
	runCtx, cancel := cpuTimeout(ctx, timeout)
	defer cancel()
	iter := code.RunWithContext(runCtx, v, &workBudget{left: RuleWorkBudget})
	out, ok = iter.Next()
	if !ok {
		return nil, false, nil
	}
	if e, isErr := out.(error); isErr {
		if errors.Is(e, context.DeadlineExceeded) {
			return nil, false, errTimeout{timeout}
		}
		var halt *gojq.HaltError
		if errors.As(e, &halt) && halt.Value() == nil {
			return nil, false, nil
		}
		return nil, false, e
	}
	return out, true, nil
}

// cpuTimeout is a context that ends once this process has used timeout of
// CPU time from now, or when ctx ends; it ends with DeadlineExceeded.
func cpuTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	runCtx, cancel := context.WithCancelCause(ctx)
	start := processCPU()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if processCPU()-start >= timeout {
					cancel(context.DeadlineExceeded)
					return
				}
			}
		}
	}()
	return &causeCtx{runCtx}, func() { close(done); cancel(context.Canceled) }
}

// causeCtx reports its cause as its error, so that gojq sees
// DeadlineExceeded.
type causeCtx struct{ context.Context }

func (c *causeCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
