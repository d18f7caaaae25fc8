package mutants_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/faults/mutants"
)

// root is the module's root, seen from this package's directory.
const root = "../.."

// Every mutant applies to this tree: each snippet matches exactly once. A
// guard that moved or changed makes its mutant fail here, on `make test`,
// rather than pass unnoticed in `make mutants`.
func TestEveryMutantApplies(t *testing.T) {
	require.GreaterOrEqual(t, len(mutants.List), 15)
	require.NoError(t, mutants.Check(mutants.List, root))
}

// A snippet that matches twice, or not at all, is an error.
func TestASnippetMustMatchExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.go"), []byte("x := 1\nx := 1\ny := 2\n"), 0o644))
	for _, old := range []string{"x := 1", "z := 3"} {
		m := mutants.Mutant{ID: "m", Guard: "g", Package: "./", Run: "T", Edits: []mutants.Edit{{File: "a.go", Old: old, New: "w"}}}
		require.ErrorIs(t, mutants.Check([]mutants.Mutant{m}, dir), mutants.ErrSnippet, old)
		require.ErrorIs(t, m.Apply(dir), mutants.ErrSnippet, old)
	}
	m := mutants.Mutant{ID: "m", Guard: "g", Package: "./", Run: "T", Edits: []mutants.Edit{{File: "a.go", Old: "y := 2", New: "y := 3"}}}
	require.NoError(t, m.Apply(dir))
	src, err := os.ReadFile(filepath.Join(dir, "a.go"))
	require.NoError(t, err)
	require.Equal(t, "x := 1\nx := 1\ny := 3\n", string(src))
}

// docs/RELIABILITY.md lists every mutant as List has them.
func TestReliabilityDocListsEveryMutant(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, mutants.DocPath))
	require.NoError(t, err)
	table, err := mutants.DocTable(string(doc))
	require.NoError(t, err)
	require.Equal(t, mutants.Markdown(mutants.List), table,
		"%s is out of date: go run ./faults/cmd/mutants -docs rewrites its table", mutants.DocPath)
}
