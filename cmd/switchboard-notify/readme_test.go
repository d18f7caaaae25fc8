package main

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEListsEveryVariable keeps the README's environment table and
// loadConfig in step: every variable read is documented, and every
// documented variable is read.
func TestREADMEListsEveryVariable(t *testing.T) {
	t.Parallel()
	var read []string
	_, err := loadConfig(func(k string) (string, bool) {
		if !slices.Contains(read, k) {
			read = append(read, k)
		}
		return "", false
	})
	require.NoError(t, err)

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\|").FindAllSubmatch(readme, -1) {
		documented = append(documented, string(m[1]))
	}
	sort.Strings(read)
	sort.Strings(documented)
	require.Equal(t, read, documented)
}
