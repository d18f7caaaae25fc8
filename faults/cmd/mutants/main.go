package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard/notify/faults/mutants"
	"github.com/switchboard/notify/host/hoststore"
	"github.com/switchboard/notify/store"
	"github.com/switchboard/notify/store/storetest"
)

// Verdicts.
const (
	killed   = "KILLED"
	survived = "SURVIVED"
	broken   = "BROKEN" // the mutant does not compile: a harness error
	harness  = "ERROR"  // the mutant could not be run as listed
)

type result struct {
	m       mutants.Mutant
	verdict string
	by      []string // the tests that failed
	why     string
	took    time.Duration
	log     string
}

func main() {
	var (
		jobs     = flag.Int("j", min(runtime.GOMAXPROCS(0), 2), "mutants run at once")
		fast     = flag.Bool("fast", os.Getenv("MUTANTS") == "fast", "only the fast subset (CI); MUTANTS=fast sets it too")
		only     = flag.String("run", "", "only the mutants whose ids match this regexp")
		timeout  = flag.Duration("timeout", 8*time.Minute, "go test -timeout of each mutant's tests")
		baseline = flag.Bool("baseline", false, "first run each mutant's tests on the unmutated copy: they must pass")
		markdown = flag.Bool("markdown", false, "print the table of docs/RELIABILITY.md and exit")
		docs     = flag.Bool("docs", false, "rewrite the table in docs/RELIABILITY.md and exit")
		goBin    = flag.String("go", "go", "the go command")
		keep     = flag.Bool("keep", false, "keep the scratch copies")
	)
	flag.Parse()
	if *markdown {
		fmt.Print(mutants.Markdown(mutants.List))
		return
	}
	root, err := moduleRoot(*goBin)
	if err != nil {
		fatal(err)
	}
	if *docs {
		if err := writeDocs(root); err != nil {
			fatal(err)
		}
		return
	}
	if err := mutants.Check(mutants.List, root); err != nil {
		fatal(fmt.Errorf("the list of mutants does not apply to this tree:\n%w", err))
	}
	var re *regexp.Regexp
	if *only != "" {
		if re, err = regexp.Compile(*only); err != nil {
			fatal(err)
		}
	}
	list := mutants.Select(mutants.List, re, *fast)
	if len(list) == 0 {
		fatal(errors.New("no mutant selected"))
	}
	r := &runner{root: root, goBin: *goBin, timeout: *timeout, keep: *keep,
		logs: filepath.Join(root, "bin", "mutants"), scratch: scratchDir(root)}
	if err := os.MkdirAll(r.logs, 0o755); err != nil {
		fatal(err)
	}
	start := time.Now()
	if *baseline {
		if err := r.baseline(list, *jobs); err != nil {
			fatal(err)
		}
	}
	results := r.runAll(list, *jobs)
	bad := report(os.Stdout, results, time.Since(start))
	if bad > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}

func moduleRoot(goBin string) (string, error) {
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module")
	}
	return filepath.Dir(mod), nil
}

func writeDocs(root string) error {
	path := filepath.Join(root, mutants.DocPath)
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := mutants.WithTable(string(doc), mutants.Markdown(mutants.List))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// scratchDir is where the copies live: outside the module (gofmt and go
// vet of the module never see a mutated file), at a path that stays the
// same from run to run, so that the build cache finds its packages again.
func scratchDir(root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(os.TempDir(), "switchboard-mutants-"+hex.EncodeToString(sum[:])[:12])
}

type runner struct {
	root, goBin, logs, scratch string
	timeout                    time.Duration
	keep                       bool
}

// runAll runs list, jobs mutants at a time, each in a slot of its own.
func (r *runner) runAll(list []mutants.Mutant, jobs int) []result {
	jobs = max(1, min(jobs, len(list)))
	results := make([]result, len(list))
	next := make(chan int)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for slot := range jobs {
		wg.Go(func() {
			for i := range next {
				res := r.run(slot, list[i])
				mu.Lock()
				results[i] = res
				fmt.Printf("%-9s %-26s %6.0fs  %s\n", res.verdict, res.m.ID, res.took.Seconds(), res.summary())
				mu.Unlock()
			}
		})
	}
	for i := range list {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

func (res result) summary() string {
	switch {
	case res.verdict == killed:
		return "by " + strings.Join(res.by, ", ")
	case res.why != "":
		return res.why + " (" + res.log + ")"
	}
	return res.log
}

// run applies m to a fresh copy of the module in slot and runs its tests.
func (r *runner) run(slot int, m mutants.Mutant) (res result) {
	start := time.Now()
	res = result{m: m, log: filepath.Join(r.logs, m.ID+".log")}
	defer func() { res.took = time.Since(start) }()
	dir, err := r.copyModule(slot)
	if err == nil {
		err = m.Apply(dir)
	}
	if err != nil {
		res.verdict, res.why = harness, err.Error()
		return res
	}
	if !r.keep {
		defer os.RemoveAll(dir)
	}
	if why := r.exercised(dir, m); why != "" {
		res.verdict, res.why = harness, why
		return res
	}
	out, ok := r.goTest(dir, m.Package, m.Run)
	_ = os.WriteFile(res.log, out, 0o644)
	r.dropDatabases(out, touchesSchema(m))
	failed, ran := testsOf(out)
	switch {
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		res.verdict, res.why = broken, "the mutated code does not compile"
	case ok && ran == 0:
		res.verdict, res.why = harness, "no test matched -run "+m.Run
	case ok:
		res.verdict = survived
	case len(failed) == 0:
		res.verdict, res.by = killed, []string{"go test failed: " + lastLine(out)}
	default:
		res.verdict, res.by = killed, failed
	}
	return res
}

// baseline runs the tests of list on an unmutated copy: a mutant is
// killed only by tests that pass without it.
func (r *runner) baseline(list []mutants.Mutant, jobs int) error {
	type sel struct{ pkg, run string }
	var sels []sel
	for _, m := range list {
		if s := (sel{m.Package, m.Run}); !slices.Contains(sels, s) {
			sels = append(sels, s)
		}
	}
	// One go test per package, every selector of it at once.
	byPkg := map[string][]string{}
	var pkgs []string
	for _, s := range sels {
		if _, ok := byPkg[s.pkg]; !ok {
			pkgs = append(pkgs, s.pkg)
		}
		byPkg[s.pkg] = append(byPkg[s.pkg], "(?:"+s.run+")")
	}
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, jobs))
	for i, pkg := range pkgs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			dir, err := r.copyModule(jobs + i)
			if err != nil {
				errs[i] = err
				return
			}
			if !r.keep {
				defer os.RemoveAll(dir)
			}
			start := time.Now()
			out, ok := r.goTest(dir, pkg, strings.Join(byPkg[pkg], "|"))
			log := filepath.Join(r.logs, "baseline-"+strings.Trim(strings.ReplaceAll(pkg, "/", "-"), ".-")+".log")
			_ = os.WriteFile(log, out, 0o644)
			r.dropDatabases(out, false)
			fmt.Printf("%-9s %-26s %6.0fs  %s\n", map[bool]string{true: "PASS", false: "FAIL"}[ok], "baseline "+pkg,
				time.Since(start).Seconds(), log)
			if !ok {
				errs[i] = fmt.Errorf("the unmutated tests of %s fail (%s): no mutant can be judged by them", pkg, log)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// goTest runs the tests of pkg matching run in dir, without -race (the
// mutants need the checks, not the race detector) and with CI=true (no
// test skips). It returns the output and whether go test passed.
func (r *runner) goTest(dir, pkg, run string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.goBin, "test", "-count=1", "-vet=off", "-v", "-timeout", r.timeout.String(), "-run", run, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CI=true")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		out = append(out, []byte("\nmutants: go test did not end within its -timeout and 2 minutes: killed\n")...)
	}
	return out, err == nil
}

// exercised checks that m's tests can see it: every package it edits is
// compiled into the tests' binary.
func (r *runner) exercised(dir string, m mutants.Mutant) string {
	cmd := exec.Command(r.goBin, "list", "-deps", "-test", "-f", "{{.Dir}}", m.Package)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go list %s: %v: %s", m.Package, err, lastLine(out))
	}
	deps := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		deps[filepath.Clean(l)] = true
	}
	for _, e := range m.Edits {
		if pkgDir := filepath.Join(dir, filepath.Dir(filepath.FromSlash(e.File))); !deps[pkgDir] && !embedded(dir, e.File, deps) {
			return fmt.Sprintf("the tests of %s do not compile in %s", m.Package, e.File)
		}
	}
	return ""
}

// embedded reports a non-Go file of a package that embeds it (the
// migrations, embedded by the package store): a parent directory of the
// file is among deps.
func embedded(dir, file string, deps map[string]bool) bool {
	if strings.HasSuffix(file, ".go") {
		return false
	}
	for d := filepath.Dir(filepath.FromSlash(file)); d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if deps[filepath.Join(dir, d)] {
			return true
		}
	}
	return false
}

// testsOf returns the top-level tests that failed, and how many ran.
func testsOf(out []byte) (failed []string, ran int) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "=== RUN   ") && !strings.Contains(line, "/") {
			ran++
		}
		if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
			name, _, _ = strings.Cut(name, " ")
			if !slices.Contains(failed, name) {
				failed = append(failed, name)
			}
		}
	}
	return failed, ran
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func touchesSchema(m mutants.Mutant) bool {
	return slices.ContainsFunc(m.Edits, func(e mutants.Edit) bool { return strings.HasSuffix(e.File, ".sql") })
}

// Databases pgtestdb leaves behind: a failed test's instance is kept (to
// inspect); the mutants fail tests on purpose, so the harness drops the
// instances their logs name, and the templates of mutated schemas.
var instanceRE = regexp.MustCompile(`testdbconf: \S*/(testdb_tpl_([0-9a-f]+)_inst_[0-9a-f]+)\b`)

func (r *runner) dropDatabases(out []byte, schema bool) {
	var names []string
	templates := map[string]bool{}
	for _, m := range instanceRE.FindAllSubmatch(out, -1) {
		if n := string(m[1]); !slices.Contains(names, n) {
			names = append(names, n)
		}
		if h := string(m[2]); schema && h != store.MigrationsHash() && h != hoststore.MigrationsHash() {
			templates["testdb_tpl_"+string(m[2])] = true
		}
	}
	if len(names) == 0 && len(templates) == 0 {
		return
	}
	for _, n := range names {
		dropDatabase(n, false)
	}
	for n := range templates {
		dropDatabase(n, true)
	}
}

// dropDatabase drops a test database (a template: unmarked first), on a
// connection of its own.
func dropDatabase(name string, template bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, storetest.ServerURL("postgres"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "mutants: cannot drop test database %s: %v\n", name, err)
		return
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if template {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" IS_TEMPLATE false"); err != nil {
			fmt.Fprintf(os.Stderr, "mutants: unmark template %s: %v\n", name, err)
		}
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "mutants: drop %s: %v\n", name, err)
	}
}

// copyModule copies the module's working tree (uncommitted changes
// included) into the slot's directory, afresh: no .git, bin, .pgdata,
// node_modules, nor the bench module.
func (r *runner) copyModule(slot int) (string, error) {
	dst := filepath.Join(r.scratch, fmt.Sprintf("slot-%d", slot))
	if err := os.RemoveAll(dst); err != nil {
		return "", err
	}
	skip := map[string]bool{".git": true, "bin": true, ".pgdata": true, "node_modules": true, "bench": true}
	err := filepath.WalkDir(r.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(r.root, path)
		if err != nil {
			return err
		}
		if d.IsDir() && rel != "." && (skip[d.Name()] && filepath.Dir(rel) == "." || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil // symlinks and the like: nothing the tests build from
	})
	if err != nil {
		return "", fmt.Errorf("copying the module: %w", err)
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// report prints the table of results and returns how many were not
// killed.
func report(w io.Writer, results []result, took time.Duration) int {
	fmt.Fprintf(w, "\n%-26s %-9s %7s  %s\n", "MUTANT", "RESULT", "TIME", "KILLED BY / WHY")
	bad := 0
	for _, res := range results {
		fmt.Fprintf(w, "%-26s %-9s %6.0fs  %s\n", res.m.ID, res.verdict, res.took.Seconds(), res.summary())
		if res.verdict != killed {
			bad++
		}
	}
	fmt.Fprintf(w, "\n%d mutants, %d killed, %d not (survived, broken or not run), in %v\n",
		len(results), len(results)-bad, bad, took.Round(time.Second))
	return bad
}
