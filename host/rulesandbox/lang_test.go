package rulesandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// samplePayload is a GitHub-shaped delivery, decoded as Receive decodes it.
func samplePayload(t testing.TB) map[string]any {
	t.Helper()
	var p map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"action":"opened","sender":{"login":"octocat"},
		"repository":{"full_name":"acme/forge"},
		"issue":{"number":9,"title":"The build is red","body":"CI fails on main",
		"labels":[{"name":"bug"},{"name":"ci"}],"assignees":[]},
		"n":[3,1,2,3],"s":"ab","o":{"a":{"b":1}},"p":{"a":{"c":2}},"x":1.5,"big":123456789012345678901234567890}`))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&p))
	return p
}

// plainRun is gojq's own answer, the expression neither checked nor
// rewritten: every output, errors as their messages.
func plainRun(t *testing.T, expr string, v any) []any {
	t.Helper()
	q, err := gojq.Parse(expr)
	require.NoError(t, err)
	code, err := gojq.Compile(q)
	require.NoError(t, err)
	return collect(code.Run(v))
}

func collect(iter gojq.Iter) []any {
	var out []any
	for {
		v, ok := iter.Next()
		if !ok {
			return out
		}
		if err, isErr := v.(error); isErr {
			out = append(out, "error: "+err.Error())
			return out
		}
		out = append(out, v)
	}
}

func checkedRun(t *testing.T, expr string, v any) []any {
	t.Helper()
	code, err := compileExpr(expr)
	require.NoError(t, err, expr)
	return collect(code.RunWithContext(context.Background(), v, &workBudget{left: RuleWorkBudget}))
}

func normalized(t *testing.T, vs []any) string {
	t.Helper()
	b, err := json.Marshal(vs)
	require.NoError(t, err)
	return string(b)
}

// The rewrite changes no ordinary rule's answer: every output, in jq's
// order, errors included.
func TestCheckedRulesAnswerAsJqDoes(t *testing.T) {
	t.Parallel()
	payload := samplePayload(t)
	for _, expr := range []string{
		`.action == "opened"`, `.sender.login == "dependabot"`, `.issue.number > 1`, `.issue != null`,
		`.issue.labels | map(.name) | contains(["bug"])`, `.issue.labels[].name`, `[.issue.labels[].name] | join(",")`,
		`.issue.title | test("build"; "i")`, `.issue.title | ascii_downcase | startswith("the")`,
		`(1,2) + (10,20)`, `(1,2) * (10,20)`, `[.n[] * 2]`, `.n - [3]`, `.s + .s`, `.s * 3`, `3 * .s`, `.s * 0`,
		`.o * .p`, `.o + .p`, `{a: 1} + {b: 2}`, `[1,2] + [3]`, `null + 1`, `10 / 4`, `"a,b" / ","`, `7 % 3`,
		`.x * 2`, `.big + 1`, `.big * .big`, `-.issue.number`, `"\(.issue.number)-\(.o)-\(.s)"`,
		`{(.s): .issue.number, "k\(.x)": [.n[]]}`, `.n | add`, `.n | sort | unique`, `.o | keys`,
		`.o | to_entries`, `.issue.labels | any(.name == "ci")`, `.issue.labels | all(.name | length > 1)`,
		`first(.n[])`, `last(.n[])`, `isempty(.issue.assignees[])`, `.issue | has("title")`, `"title" | in({title: 1})`,
		`.issue.title | capture("(?<w>[a-z]+) is")`, `.issue.title | match("build").offset`, `. as {issue: {number: $n}} | $n + 1`,
		`.n as [$a, $b] | $a - $b`, `try error("x") catch .`, `.nope.deeper // "fallback"`, `if .x > 1 then "big" elif .x > 0 then "small" else "none" end`,
		`[.. | numbers] | length`, `[.[]?] | length`, `.n[1:3]`, `.n[-1]`, `.["action"]`, `.s | tojson`, `.o | tostring`,
		`[.n[] | select(. > 1)] | max`, `.issue.title | split(" ") | reverse`, `.issue.body | ltrimstr("CI ")`,
		`SubjectExpr`, `.[.s]`, `.n[.n[0]]`, `[.n[] | tostring] | join("-")`, `"x" | inside("xyz")`,
		`[1,[2]] | contains([[2]])`, `{} | .a.b.c`, `[limit]`,
	} {
		if expr == "SubjectExpr" {
			expr = `[.repository.full_name, (.issue.number // .pull_request.number)] | select(all(. != null)) | map(tostring) | join("#")`
		}
		if expr == `[limit]` {
			continue
		}
		t.Run(expr, func(t *testing.T) {
			require.Equal(t, normalized(t, plainRun(t, expr, payload)), normalized(t, checkedRun(t, expr, payload)))
		})
	}
}

// The attacker's expressions of issue 18 item 8, and the rest of what the
// subset refuses, are refused when checked, naming what they use.
func TestExpressionsOutsideTheSubsetAreRefused(t *testing.T) {
	t.Parallel()
	for expr, what := range map[string]string{
		`setpath([536870912]; 1)`:            "setpath/2",
		`.[536870912] = 1`:                   "assignment",
		`.a |= 1`:                            "assignment",
		`.a += 1`:                            "assignment",
		`[range(1e9)]`:                       "range/1",
		`def f: f; f`:                        "def",
		`reduce .[] as $x (0; . + $x)`:       "reduce",
		`foreach .[] as $x (0; 1)`:           "foreach",
		`label $out | 1`:                     "label/break",
		`limit(3; .[])`:                      "limit/2",
		`repeat(.)`:                          "repeat/1",
		`recurse(.[])`:                       "recurse/1",
		`getpath(["a"])`:                     "getpath/1",
		`paths`:                              "paths/0",
		`$ENV.HOME`:                          "$ENV",
		`env.HOME`:                           "env/0",
		`$__loc__`:                           "$__loc__",
		`input`:                              "input/0",
		`@base64`:                            "@base64",
		`@sh "echo \(.)"`:                    "@sh",
		`"x" | sub("x"; "yy")`:               "sub/2",
		`"x" | gsub("x"; "yy")`:              "gsub/2",
		`implode`:                            "implode/0",
		`combinations`:                       "combinations/0",
		`walk(.)`:                            "walk/1",
		`_multiply(1; 2)`:                    "_multiply/2",
		`_sb_keep(1)`:                        "_sb_keep/1",
		`$__sb`:                              "$__sb",
		`. as $__sb | 1`:                     "$__sb",
		`test(.re)`:                          "not a string literal",
		`match("a"; "g")`:                    `"g" flag`,
		`fromjson`:                           "fromjson/0",
		`sort_by(.a)`:                        "sort_by/1",
		`indices(1)`:                         "indices/1",
		`"x" | ascii`:                        "ascii/0",
		`import "a" as a; 1`:                 "import",
		`tostream`:                           "tostream/0",
		`splits("a")`:                        "splits/1",
		`halt_error`:                         "halt_error/0",
		`debug`:                              "debug/0",
		`input_filename`:                     "input_filename/0",
		`with_entries(.)`:                    "with_entries/1",
		`{a: 1} | .a as $x | {$__loc__}`:     "$__loc__",
		`. as {$__loc__} | 1`:                "$__loc__",
		`first(range(10))`:                   "range/1",
		`[.[] | setpath([1e9]; 1)] | length`: "setpath/2",
	} {
		_, err := compileExpr(expr)
		var na *notAllowedError
		require.True(t, errors.As(err, &na), "%s: %v", expr, err)
		require.Contains(t, na.Error(), what, expr)
		require.Contains(t, na.Error(), "checked subset of jq", expr)
	}
}

// heapGrowth runs f and reports how far the heap in use rose above where it
// started, sampled while f runs.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			top = max(top, s.HeapAlloc)
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	f()
	runtime.ReadMemStats(&m)
	close(done)
	top := max(<-peak, m.HeapAlloc)
	if top < base {
		return 0
	}
	return top - base
}

// growthExprs are expressions inside the subset's grammar that grow a value
// without end, past the save-time check of a literal repeat; n scales them: the multiplier is 10^n, the chains 2^(n+9)
// times their start (the real attack is n = 9 and chains 40 deep).
func growthExprs(n int) map[string]string {
	multiplier := fmt.Sprintf("1e%d", n)
	depth := n + 9
	chain := []string{`(.s + .s) as $a0`}
	dag := []string{`[., .] as $d0`}
	for i := 1; i < depth; i++ {
		chain = append(chain, fmt.Sprintf(`($a%d + $a%d) as $a%d`, i-1, i-1, i))
		dag = append(dag, fmt.Sprintf(`[$d%d, $d%d] as $d%d`, i-1, i-1, i))
	}
	last := depth - 1
	return map[string]string{
		"repeat":       `"x" * (` + multiplier + ` | floor) | length > 0`,
		"repeat var":   `(` + multiplier + `) as $n | "x" * $n | length > 0`,
		"repeat left":  `(` + multiplier + ` | floor) * .s | length > 0`,
		"doubling":     strings.Join(chain, " | ") + fmt.Sprintf(` | $a%d | length > 0`, last),
		"shared parts": strings.Join(dag, " | ") + fmt.Sprintf(` | $d%d | tostring | length > 0`, last),
		"interpolate":  strings.Join(dag, " | ") + fmt.Sprintf(` | "\\($d%d)" | length > 0`, last),
		"generator":    `[` + strings.Repeat(`(1,1) | `, depth+4) + `.] | length > 0`,
		"join":         `(` + multiplier + `) as $n | [.s, .s] | join("x" * $n) | length > 0`,
	}
}

// growthResult is one growth expression's fault ("" for none).
type growthResult struct{ Name, Fault string }

// runGrowth runs growthExprs(n) in process, the checked subset's own
// budget alone, on a 1 KiB payload and returns their faults and how far
// the heap grew meanwhile.
func runGrowth(t *testing.T, n int) ([]growthResult, uint64) {
	t.Helper()
	payload := map[string]any{"s": strings.Repeat("ab", 512)}
	var results []growthResult
	grew := heapGrowth(func() {
		for name, expr := range growthExprs(n) {
			code, err := compileExpr(expr)
			require.NoError(t, err, "%s passes the check: %s", name, expr)
			_, _, err = runExpr(context.Background(), code, payload, 10*time.Second)
			r := growthResult{Name: name}
			if err != nil {
				r.Fault = err.Error()
			}
			results = append(results, r)
		}
	})
	t.Logf("the heap grew %d MiB", grew>>20)
	return results, grew
}

// The expressions that pass the syntactic check but grow a value without
// end fault when run, without growing the heap: each is stopped by its work
// budget. Here they are scaled down (10^8, chains 2^17) so that code
// without the budget builds about 100 to 300 MiB, past the 64 MiB this
// test allows, without taking the machine down.
func TestGrowingExpressionsFaultWithinTheirBudget(t *testing.T) {
	results, grew := runGrowth(t, 8)
	for _, r := range results {
		require.Contains(t, r.Fault, "past the rules' limit", r.Name)
	}
	require.Less(t, grew, uint64(64<<20), "the heap grew %d MiB", grew>>20)
}

// The attack at full size (10^31 and chains 40 deep, past the 10^9 of the report): the same faults, the
// same bound. It first makes sure a budget is in place, so that code
// without one is stopped here rather than run out of memory.
func TestFullSizeGrowthFaultsWithinItsBudget(t *testing.T) {
	code, err := compileExpr(`(1e7) as $n | "x" * $n | length`)
	require.NoError(t, err)
	_, _, err = runExpr(context.Background(), code, nil, 10*time.Second)
	require.ErrorIs(t, err, errBudget, "no work budget: the full-size attack is not run")
	results, grew := runGrowth(t, 31)
	for _, r := range results {
		require.Contains(t, r.Fault, "past the rules' limit", r.Name)
	}
	require.Less(t, grew, uint64(64<<20), "the heap grew %d MiB", grew>>20)
}

func TestLiteralRepeatPastTheBudgetIsRefused(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{`"x" * 1000000000`, `1e9 * "ab"`, `.a == ("x" * 1e9)`} {
		_, err := compileExpr(expr)
		var na *notAllowedError
		require.ErrorAs(t, err, &na, expr)
		require.Contains(t, na.Error(), "repeated past the rules' limit")
	}
	_, err := compileExpr(`"x" * 3 == "xxx"`)
	require.NoError(t, err)
}

// genExpr draws an expression from the subset's grammar, depth bounded.
func genExpr(t *rapid.T, depth int) string {
	leaves := []string{`.`, `.s`, `.n`, `.a`, `.o`, `.a[]`, `..`, `.a[0]`, `.o.k`, `$v`, `1`, `1e9`, `"x"`, `"ab"`, `null`, `true`, `[]`, `{}`}
	if depth <= 0 {
		return rapid.SampledFrom(leaves).Draw(t, "leaf")
	}
	sub := func(name string) string { return genExpr(t, depth-1) }
	switch rapid.IntRange(0, 12).Draw(t, "form") {
	case 0:
		op := rapid.SampledFrom([]string{"+", "-", "*", "/", "%", "|", ",", "==", "<", "and", "or", "//"}).Draw(t, "op")
		return "(" + sub("l") + " " + op + " " + sub("r") + ")"
	case 1:
		return "[" + sub("elem") + "]"
	case 2:
		return "{k: " + sub("v") + ", (" + sub("key") + " | tostring): 1}"
	case 3:
		return "(" + sub("bind") + ") as $v | " + sub("body")
	case 4:
		return "if " + sub("c") + " then " + sub("t") + " else " + sub("e") + " end"
	case 5:
		return "try " + sub("b") + " catch ."
	case 6:
		return `"\(` + sub("i") + `)-\(` + sub("j") + `)"`
	case 7:
		f := rapid.SampledFrom([]string{"length", "keys", "tostring", "tojson", "add", "sort", "unique", "reverse",
			"ascii_downcase", "to_entries", "type", "not", "min", "max", "first", "last", "values", "floor", "recurse"}).Draw(t, "f0")
		return "(" + sub("in") + " | " + f + ")"
	case 8:
		f := rapid.SampledFrom([]string{"map", "select", "any", "all", "join", "split", "contains", "inside", "has",
			"startswith", "ltrimstr", "first", "last", "isempty"}).Draw(t, "f1")
		return "(" + sub("in") + " | " + f + "(" + sub("arg") + "))"
	case 9:
		return "(" + sub("in") + ")[" + sub("idx") + "]"
	case 10:
		return "(" + sub("in") + " | test(\"a+\"; \"i\"))"
	case 11:
		return "-(" + sub("n") + ")"
	default:
		return "(" + sub("a") + ")?"
	}
}

// genPayload draws a bounded delivery.
func genPayload(t *rapid.T) map[string]any {
	s := strings.Repeat(rapid.StringN(0, 8, 8).Draw(t, "unit"), rapid.IntRange(0, 4096).Draw(t, "times"))
	var a []any
	for range rapid.IntRange(0, 200).Draw(t, "len") {
		a = append(a, rapid.OneOf(rapid.Just[any](s), rapid.Just[any](1.5), rapid.Just[any](map[string]any{"k": s})).Draw(t, "elem"))
	}
	return map[string]any{"s": s, "n": float64(rapid.IntRange(-1e9, 1e9).Draw(t, "n")), "a": a, "o": map[string]any{"k": a, "s": s}}
}

// Property: any expression of the subset, on any bounded payload, answers
// within its time and keeps its heap within bounds.
//
// "Within its time" is a condition, not a wall-clock bound (issue 23, item
// 9: asserting < 500 ms failed a unit test on a busy 2-core CI box): a run
// whose time is up stops at its next step, whatever the expression, and
// answers with the time's error, never a value computed past it (gojq
// checks the run's context at every step, and the work budget bounds what
// one step builds). The wall time a run takes is bench's to measure.
func TestCheckedExpressionsAlwaysAnswerWithinBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		expr := "1 as $v | " + genExpr(t, rapid.IntRange(1, 6).Draw(t, "depth"))
		code, err := compileExpr(expr)
		if err != nil {
			var na *notAllowedError
			if errors.As(err, &na) {
				require.Contains(t, na.what, "repeated past", "the grammar is the subset's: %s", expr)
			}
			return // refused at save: a literal repeat past the budget, a compile error
		}
		payload := genPayload(t)
		timeUp, cancel := context.WithCancel(context.Background())
		cancel()
		out, ok, err := runExpr(timeUp, code, payload, time.Hour)
		require.False(t, ok, "%s answered %v after its time was up", expr, out)
		require.ErrorIs(t, err, context.Canceled, "%s stops when its time is up", expr)

		const timeout = 100 * time.Millisecond
		grew := heapGrowth(func() {
			_, _, _ = runExpr(context.Background(), code, payload, timeout)
		})
		require.Less(t, grew, uint64(64<<20), "%s: the heap grew %d MiB", expr, grew>>20)
	})
}

// Every rule the docs, the demo and the tests show is still accepted.
func TestTheDocumentedRulesAreInTheSubset(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		".sender.login", `[.repository.full_name, (.issue.number // .pull_request.number)] | select(all(. != null)) | map(tostring) | join("#")`,
		`.issue.title // .pull_request.title // .title // empty | strings`,
		`.comment.body // .issue.body // .pull_request.body // empty | strings`,
		`.action == "opened"`, `.action == "closed"`, `.sender.login == "dependabot"`, `.issue != null`,
		`.issue.number > 0`, `.issue.number > 1`, `.issue.number > 3`, `.issue.number == 9`, `true`, `false`,
	} {
		_, err := compileExpr(expr)
		require.NoError(t, err, expr)
	}
}
