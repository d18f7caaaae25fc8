package mutants

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Mutant removes one guard of the delivery core.
type Mutant struct {
	// ID names the mutant (lower case, dashes), in reports and the docs.
	ID string
	// Guard says what the guard is and what its absence lets through.
	Guard string
	// Edits are the changes that remove it, applied in order.
	Edits []Edit
	// Package is the package whose tests must kill it, as go test names it
	// from the module's root ("./store/").
	Package string
	// Run is the -run expression of those tests.
	Run string
	// Fast marks the mutants CI runs (make mutants-fast): their tests take
	// seconds.
	Fast bool
}

// Edit replaces Old, which must occur exactly once in File, by New.
type Edit struct {
	File     string // slash-separated, relative to the module's root
	Old, New string
}

// Selector is the mutant's tests as a person would type them.
func (m Mutant) Selector() string {
	return fmt.Sprintf("go test -run '%s' %s", m.Run, m.Package)
}

// ErrSnippet reports an edit whose snippet does not occur exactly once.
var ErrSnippet = errors.New("the mutant's snippet does not match exactly once")

// Apply applies m's edits to the module rooted at dir.
func (m Mutant) Apply(dir string) error {
	for i, e := range m.Edits {
		path := filepath.Join(dir, filepath.FromSlash(e.File))
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("mutant %s, edit %d: %w", m.ID, i+1, err)
		}
		out, err := e.apply(src)
		if err != nil {
			return fmt.Errorf("mutant %s, edit %d of %s: %w", m.ID, i+1, e.File, err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("mutant %s, edit %d: %w", m.ID, i+1, err)
		}
	}
	return nil
}

func (e Edit) apply(src []byte) ([]byte, error) {
	if e.Old == "" || e.Old == e.New {
		return nil, errors.New("an edit must replace a non-empty snippet by another")
	}
	if n := bytes.Count(src, []byte(e.Old)); n != 1 {
		return nil, fmt.Errorf("%w: found %d times: %q", ErrSnippet, n, e.Old)
	}
	return bytes.Replace(src, []byte(e.Old), []byte(e.New), 1), nil
}

// Check checks the list: ids well formed and unique, every mutant with an
// edit, a package and a run expression that compiles, and, when dir is not
// empty, every edit applying exactly once to the module rooted at dir.
// Edits of one mutant to one file apply in sequence.
func Check(list []Mutant, dir string) error {
	var errs []error
	seen := map[string]bool{}
	idRE := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	for _, m := range list {
		switch {
		case !idRE.MatchString(m.ID):
			errs = append(errs, fmt.Errorf("mutant id %q: lower case words and dashes", m.ID))
		case seen[m.ID]:
			errs = append(errs, fmt.Errorf("mutant id %q twice", m.ID))
		case len(m.Edits) == 0 || m.Guard == "" || !strings.HasPrefix(m.Package, "./") || m.Run == "":
			errs = append(errs, fmt.Errorf("mutant %s: edits, guard, package (./dir/) and run are required", m.ID))
		}
		seen[m.ID] = true
		if _, err := regexp.Compile(m.Run); err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: run: %w", m.ID, err))
		}
		if dir == "" {
			continue
		}
		if err := hasTest(dir, m); err != nil {
			errs = append(errs, err)
		}
		files := map[string][]byte{}
		for i, e := range m.Edits {
			src, ok := files[e.File]
			if !ok {
				var err error
				if src, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.File))); err != nil {
					errs = append(errs, fmt.Errorf("mutant %s, edit %d: %w", m.ID, i+1, err))
					continue
				}
			}
			out, err := e.apply(src)
			if err != nil {
				errs = append(errs, fmt.Errorf("mutant %s, edit %d of %s: %w", m.ID, i+1, e.File, err))
				continue
			}
			files[e.File] = out
		}
	}
	return errors.Join(errs...)
}

// Select returns the mutants of list whose ids match re (all for nil), only
// the fast ones when fast is set.
func Select(list []Mutant, re *regexp.Regexp, fast bool) []Mutant {
	var out []Mutant
	for _, m := range list {
		if (re == nil || re.MatchString(m.ID)) && (!fast || m.Fast) {
			out = append(out, m)
		}
	}
	return out
}

// Markdown is the table of docs/RELIABILITY.md: every mutant, the guard it
// removes, where, and the tests that kill it.
func Markdown(list []Mutant) string {
	var b strings.Builder
	b.WriteString("| Mutant | Guard removed | Where | Killed by | CI |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, m := range list {
		files := []string{}
		for _, e := range m.Edits {
			if len(files) == 0 || files[len(files)-1] != "`"+e.File+"`" {
				files = append(files, "`"+e.File+"`")
			}
		}
		ci := ""
		if m.Fast {
			ci = "fast"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` %s | %s |\n", m.ID, cell(m.Guard), strings.Join(files, ", "),
			strings.TrimSuffix(strings.TrimPrefix(m.Package, "./"), "/"), "`"+cell(m.Run)+"`", ci)
	}
	return b.String()
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// Doc markers: the table sits between them in docs/RELIABILITY.md.
const (
	DocBegin = "<!-- mutants:begin (generated: go run ./faults/cmd/mutants -docs) -->"
	DocEnd   = "<!-- mutants:end -->"
)

// DocPath is where the table is documented, relative to the module's root.
const DocPath = "docs/RELIABILITY.md"

// DocTable returns the text between the markers of doc.
func DocTable(doc string) (string, error) {
	_, rest, ok := strings.Cut(doc, DocBegin+"\n")
	if !ok {
		return "", fmt.Errorf("%s: no line %q", DocPath, DocBegin)
	}
	table, _, ok := strings.Cut(rest, DocEnd)
	if !ok {
		return "", fmt.Errorf("%s: no %q after the table", DocPath, DocEnd)
	}
	return table, nil
}

// WithTable returns doc with the text between the markers replaced by
// table.
func WithTable(doc, table string) (string, error) {
	head, rest, ok := strings.Cut(doc, DocBegin+"\n")
	if !ok {
		return "", fmt.Errorf("%s: no line %q", DocPath, DocBegin)
	}
	_, tail, ok := strings.Cut(rest, DocEnd)
	if !ok {
		return "", fmt.Errorf("%s: no %q after the table", DocPath, DocEnd)
	}
	return head + DocBegin + "\n" + table + DocEnd + tail, nil
}

var testFuncRE = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// hasTest checks that m.Run matches a test of m.Package (read from its
// _test.go files): a selector that runs nothing would let every mutant
// survive, or, worse, "pass".
func hasTest(dir string, m Mutant) error {
	run, err := regexp.Compile(m.Run)
	if err != nil {
		return nil // reported above
	}
	files, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(m.Package), "*_test.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, t := range testFuncRE.FindAllSubmatch(src, -1) {
			if run.Match(t[1]) {
				return nil
			}
		}
	}
	return fmt.Errorf("mutant %s: no test of %s matches -run %s", m.ID, m.Package, m.Run)
}
