//go:build !race

// The worker's limits are what these tests prove, and the race detector
// changes both: ThreadSanitizer's shadow memory counts against
// RLIMIT_DATA and every program runs several times slower. They run
// without -race (make test runs this package once more without it).

package rulesandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// anyFuncs are gojq's functions, builtin or not, with their arities: the
// generator calls any of them, most of which the checked subset refuses.
var anyFuncs = map[string][]int{
	"range": {1, 2, 3}, "repeat": {1}, "recurse": {0, 1, 2}, "limit": {2}, "until": {2}, "while": {2},
	"splits": {1, 2}, "sub": {2, 3}, "gsub": {2, 3}, "test": {1, 2}, "match": {1, 2}, "capture": {1, 2},
	"scan": {1, 2}, "split": {1, 2}, "combinations": {0, 1}, "walk": {1}, "paths": {0, 1}, "path": {1},
	"getpath": {1}, "setpath": {2}, "delpaths": {1}, "to_entries": {0}, "from_entries": {0}, "with_entries": {1},
	"tojson": {0}, "fromjson": {0}, "implode": {0}, "explode": {0}, "tostream": {0}, "fromstream": {1},
	"truncate_stream": {1}, "group_by": {1}, "unique_by": {1}, "sort_by": {1}, "min_by": {1}, "max_by": {1},
	"flatten": {0, 1}, "add": {0, 1}, "join": {1}, "ascii": {0}, "ltrimstr": {1}, "rtrimstr": {1},
	"indices": {1}, "index": {1}, "rindex": {1}, "inside": {1}, "contains": {1}, "env": {0}, "input": {0},
	"inputs": {0}, "debug": {0, 1}, "stderr": {0}, "halt": {0}, "halt_error": {0, 1}, "input_filename": {0},
	"now": {0}, "mktime": {0}, "gmtime": {0}, "strftime": {1}, "todate": {0}, "fromdate": {0},
	"tostring": {0}, "tonumber": {0}, "length": {0}, "keys": {0}, "error": {0, 1}, "not": {0},
	"first": {0, 1}, "last": {0, 1}, "nth": {1, 2}, "isempty": {1}, "any": {0, 1, 2}, "all": {0, 1, 2},
	"map": {1}, "map_values": {1}, "select": {1}, "empty": {0}, "reverse": {0}, "sort": {0}, "unique": {0},
	"getpath_or": {1}, "splits_x": {1}, "ltrimstr_x": {0}, "input_line_number": {0}, "@base64d": {0},
	"abs": {0}, "pow": {2}, "log": {0}, "significand": {0}, "ldexp": {2}, "infinite": {0}, "nan": {0},
	"tojson_x": {0}, "trim": {0}, "toarray": {0}, "have_literal_numbers": {0}, "pick": {1}, "debug_x": {1},
	"getpath_x": {2}, "splits_y": {3}, "limit_x": {1}, "significand_x": {2}, "utf8bytelength": {0},
	"ascii_downcase": {0}, "@text": {0}, "@json": {0}, "@html": {0}, "@uri": {0}, "@csv": {0},
	"@tsv": {0}, "@sh": {0}, "@base64": {0}, "@base32": {0}, "@base32d": {0}, "$__loc__": {0}, "$ENV": {0},
}

// genAny draws a program from gojq's whole grammar: every operator, every
// keyword, every function above, with arguments of any arity (a wrong
// arity is a compile error, which is an answer too).
func genAny(t *rapid.T, depth int) string {
	leaves := []string{`.`, `..`, `.s`, `.p`, `.a`, `.a[]`, `.[]?`, `$x`, `$__loc__`, `$ENV`, `1`, `1e9`, `-1`, `0.5`,
		`1e308`, `"x"`, `""`, `"(?:.?){1000}z"`, `null`, `true`, `false`, `[]`, `{}`, `.s[1:]`, `.[-1:]`, `."a"`}
	if depth <= 0 {
		return rapid.SampledFrom(leaves).Draw(t, "leaf")
	}
	sub := func() string { return genAny(t, depth-1) }
	switch rapid.IntRange(0, 17).Draw(t, "form") {
	case 0:
		op := rapid.SampledFrom([]string{"+", "-", "*", "/", "%", "|", ",", "==", "!=", "<", ">=", "and", "or", "//",
			"=", "|=", "+=", "-=", "*=", "/=", "%=", "//="}).Draw(t, "op")
		return "(" + sub() + " " + op + " " + sub() + ")"
	case 1:
		return "[" + sub() + "]"
	case 2:
		return "{(" + sub() + " | tostring): " + sub() + ", a: " + sub() + "}"
	case 3:
		return "(" + sub() + ") as $x | " + sub()
	case 4:
		return "(" + sub() + ") as [$x, {a: $y}] ?// $x | " + sub()
	case 5:
		return "if " + sub() + " then " + sub() + " elif " + sub() + " then " + sub() + " else " + sub() + " end"
	case 6:
		return "try " + sub() + " catch " + sub()
	case 7:
		return "reduce " + sub() + " as $x (" + sub() + "; " + sub() + ")"
	case 8:
		return "foreach " + sub() + " as $x (" + sub() + "; " + sub() + "; " + sub() + ")"
	case 9:
		return "def f: " + sub() + "; def g(h): h | f | " + sub() + "; " + sub() + " | g(f)"
	case 10:
		return "def f: " + sub() + " | f; " + sub()
	case 11:
		return "label $out | " + sub() + " | ., break $out"
	case 12:
		return `"\(` + sub() + `) \(` + sub() + `)"`
	case 13:
		names := make([]string, 0, len(anyFuncs))
		for n := range anyFuncs {
			names = append(names, n)
		}
		name := rapid.SampledFrom(sortedStrings(names)).Draw(t, "func")
		arity := rapid.SampledFrom(anyFuncs[name]).Draw(t, "arity")
		if arity == 0 {
			return "(" + sub() + " | " + name + ")"
		}
		args := make([]string, arity)
		for i := range args {
			args[i] = sub()
		}
		return "(" + sub() + " | " + name + "(" + strings.Join(args, "; ") + "))"
	case 14:
		return "(" + sub() + ")[" + sub() + ":" + sub() + "]"
	case 15:
		return "(" + sub() + ")?"
	case 16:
		return "-(" + sub() + ")"
	default:
		return "(" + sub() + ")[" + sub() + "]"
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// genRaw draws a program as raw text from jq's tokens: most do not parse,
// some do in ways no grammar above writes.
func genRaw(t *rapid.T) string {
	tokens := []string{".", "..", "|", ",", "(", ")", "[", "]", "{", "}", ":", ";", "$x", "as", "def", "f", "reduce",
		"foreach", "if", "then", "else", "end", "try", "catch", "label", "break", "?", "?//", "//", "+", "*", "/",
		"=", "|=", `"`, `\(`, "1e9", "range", "repeat", "recurse", "test", "@base64", "@sh", "$__loc__", "import",
		"include", "\"a\"", " ", "-", "not", "and", "or", "input", "env", ".s", "limit", "splits"}
	n := rapid.IntRange(1, 40).Draw(t, "tokens")
	var b strings.Builder
	for range n {
		b.WriteString(rapid.SampledFrom(tokens).Draw(t, "token"))
		b.WriteString(" ")
	}
	return b.String()
}

// genHostilePayload draws a delivery up to the 256 KiB limit, shaped to
// make programs on it cost: long strings, deep and wide values.
func genHostilePayload(t *rapid.T) []byte {
	s := strings.Repeat(rapid.StringN(1, 4, 4).Draw(t, "unit"), rapid.IntRange(0, 60_000).Draw(t, "times"))
	deep := any("x")
	for range rapid.IntRange(0, 200).Draw(t, "depth") {
		deep = []any{deep}
	}
	wide := make([]any, rapid.IntRange(0, 2000).Draw(t, "width"))
	for i := range wide {
		wide[i] = i
	}
	b, err := json.Marshal(map[string]any{"s": s, "p": s[:min(len(s), 2000)], "a": wide, "d": deep})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rss is this process's resident memory, from /proc.
func rss(t require.TestingT) uint64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return n << 10
		}
	}
	require.Fail(t, "no VmRSS in /proc/self/status")
	return 0
}

var validKinds = []Kind{Ran, NotAllowed, NoCompile, Failed, Stopped, NotRun}

// Property: any program of gojq's grammar, or any string of its tokens, on
// any hostile delivery, with the checked subset off or on, gets an answer
// (a result or a fault) for itself and for an ordinary rule after it, and
// the server's resident memory stays within 64 MiB of where it started.
func TestArbitraryProgramsAlwaysAnswerWithinBounds(t *testing.T) {
	unchecked := newPool(t, Config{Unchecked: true, Grace: 100 * time.Millisecond, Idle: 2})
	checked := newPool(t, Config{Grace: 100 * time.Millisecond, Idle: 2})
	base := rss(t)
	var top uint64
	rapid.Check(t, func(t *rapid.T) {
		var prog string
		if rapid.Bool().Draw(t, "raw") {
			prog = genRaw(t)
		} else {
			prog = genAny(t, rapid.IntRange(1, 5).Draw(t, "depth"))
		}
		payload := genHostilePayload(t)
		p := unchecked
		if rapid.Bool().Draw(t, "checked") {
			p = checked
		}
		got := p.Eval(context.Background(), "human:1", []string{prog, `.s | length`}, payload, 100*time.Millisecond)
		require.Len(t, got, 2)
		require.Contains(t, validKinds, got[0].Kind, "%s: %+v", prog, got[0])
		require.Equal(t, Ran, got[1].Kind, "the ordinary rule after %q answers: %+v", prog, got[1])
		now := rss(t)
		top = max(top, now)
		require.Less(t, now, base+64<<20, "the server's RSS grew from %d to %d MiB", base>>20, now>>20)
	})
	t.Logf("the server's RSS: %d MiB at start, %d MiB at most", base>>20, top>>20)
}

// fuzzPool is the pool FuzzRuleSandbox runs programs in.
var fuzzPool = New(Config{Unchecked: true, Grace: 100 * time.Millisecond, Idle: 2})

// FuzzRuleSandbox runs arbitrary text as a jq program, the checked subset
// off, on a delivery built from the fuzzer's bytes: every program gets an
// answer and the ordinary rule after it runs.
func FuzzRuleSandbox(f *testing.F) {
	for _, expr := range hostilePrograms {
		f.Add(expr, "ab")
	}
	f.Add(`.a`, `x`)
	f.Fuzz(func(t *testing.T, prog, unit string) {
		if len(prog) > 4096 || len(unit) > 64 {
			return
		}
		payload, _ := json.Marshal(map[string]any{"s": strings.Repeat(unit, 4000), "p": unit, "a": 1})
		got := fuzzPool.Eval(context.Background(), "human:1", []string{prog, `.a`}, payload, 100*time.Millisecond)
		require.Contains(t, validKinds, got[0].Kind)
		require.Equal(t, "1", got[1].Text, "after %q: %+v", prog, got[1])
	})
}
