// Command faults-fuzz runs the suite's fuzz targets (faults.FuzzTargets),
// each in its own package for the same time, and writes the table's row
// for them (issue 11, scenario 6b): the inputs each target tried, from go
// test's own count, are the row's bad inputs.
//
//	faults-fuzz [-fuzztime 60s] [-go go] [FuzzName ...]
//
// With names, only those targets run. The row goes to standard output
// and, when SWITCHBOARD_FAULTS_REPORT names a file, to that file. It exits
// 1 when a target fails or tries no input.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/notify/faults"
)

func main() {
	fuzztime := flag.Duration("fuzztime", time.Minute, "how long each target runs")
	goBin := flag.String("go", "go", "the go command")
	flag.Parse()
	targets := faults.FuzzTargets
	if names := flag.Args(); len(names) > 0 {
		targets = slices.DeleteFunc(slices.Clone(targets), func(t faults.FuzzTarget) bool { return !slices.Contains(names, t.Name) })
		if len(targets) != len(names) {
			fmt.Fprintf(os.Stderr, "faults-fuzz: unknown target among %v\n", names)
			os.Exit(2)
		}
	}
	var results []result
	for _, t := range targets {
		fmt.Printf("fuzz %s (%s) for %v\n", t.Name, t.Pkg, *fuzztime+t.Warmup)
		r := run(*goBin, t, *fuzztime)
		fmt.Println(tail(r.output, 3))
		if r.err != nil {
			fmt.Println(r.output)
			fmt.Printf("fuzz %s: %v\n", t.Name, r.err)
		}
		results = append(results, r)
	}
	row := summarise(results, *fuzztime)
	if err := faults.ReportRow(row); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if row.Failed {
		os.Exit(1)
	}
}

type result struct {
	target faults.FuzzTarget
	execs  int64
	output string
	err    error
	// raced counts the runs lost to Go's fuzzing coordinator race (see
	// coordinatorRace) and run again.
	raced int
}

// raceTries is how often a target whose run was lost to the coordinator
// race is run again before the loss counts as a failure.
const raceTries = 3

// coordinatorRace reports a failed run that is Go's own, not the
// target's: in Go 1.26 the -fuzztime deadline can race a worker's last
// call, and go test fails with a bare "context deadline exceeded" and
// writes no failing input (go.dev/issue/75804, fixed in Go 1.27). A run
// that wrote an input into the corpus is a real failure, whatever it
// printed.
func coordinatorRace(output string, newInputs int) bool {
	return newInputs == 0 && strings.Contains(output, "\n    context deadline exceeded\n")
}

// corpusSize counts the inputs in t's corpus directory, where go test
// writes a failing input.
func corpusSize(t faults.FuzzTarget) int {
	entries, _ := os.ReadDir(filepath.Join(t.Pkg, "testdata", "fuzz", t.Name))
	return len(entries)
}

// run fuzzes one target. The row of a scenario is never written from a
// fuzzing run (its inputs run in worker processes): the report's variable
// is taken out of the child's environment.
func run(goBin string, t faults.FuzzTarget, fuzztime time.Duration) result {
	var r result
	for try := 1; ; try++ {
		before := corpusSize(t)
		cmd := exec.Command(goBin, "test", "-count=1", "-run=^$", "-fuzz=^"+t.Name+"$",
			"-fuzztime="+(fuzztime+t.Warmup).String(), t.Pkg)
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, faults.ReportEnv+"=")
		})
		out, err := cmd.CombinedOutput()
		raced := r.raced
		r = result{target: t, output: string(out), err: err, raced: raced}
		r.execs = execs(r.output)
		if err != nil && try < raceTries && coordinatorRace(r.output, corpusSize(t)-before) {
			r.raced++
			fmt.Printf("fuzz %s: lost to Go's fuzzing coordinator race (go.dev/issue/75804: no input failed); running it again\n", t.Name)
			continue
		}
		if err == nil && r.execs <= 0 {
			r.err = fmt.Errorf("go test reported no input tried")
		}
		return r
	}
}

var execsRE = regexp.MustCompile(`execs: (\d+) `)

// execs is the input count of go test's last progress line.
func execs(output string) int64 {
	m := execsRE.FindAllStringSubmatch(output, -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// summarise makes the table's row of the fuzzing run.
func summarise(results []result, fuzztime time.Duration) faults.Row {
	row := faults.Row{
		Scenario: fmt.Sprintf("6b. fuzzing (go test -fuzz, %d targets, %v each)", len(results), fuzztime),
		Faults:   "generated inputs, mutated from the seed corpora in each package's testdata/fuzz",
		RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable, SecretsFound: faults.NotApplicable,
		BadInputs: 0,
	}
	var parts []string
	for _, r := range results {
		row.BadInputs += int(r.execs)
		status := "no failure"
		if r.raced > 0 {
			status += fmt.Sprintf(" (run again %d× after Go's fuzzing coordinator race, go.dev/issue/75804)", r.raced)
		}
		if r.err != nil {
			row.Failed = true
			status = "FAILED: " + firstLine(r.err.Error())
		}
		parts = append(parts, r.target.Name)
		warmup := ""
		if r.target.Warmup > 0 {
			warmup = fmt.Sprintf(", %v more for its warm-up", r.target.Warmup)
		}
		row.Figures = append(row.Figures, fmt.Sprintf("%s (%s, %s%s): %s inputs, %s",
			r.target.Name, strings.TrimPrefix(r.target.Pkg, "./"), r.target.What, warmup, thousands(r.execs), status))
	}
	row.Load = strings.Join(parts, ", ")
	return row
}

func firstLine(s string) string { first, _, _ := strings.Cut(s, "\n"); return first }

// thousands prints n with commas, 12,345.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
