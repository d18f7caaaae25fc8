package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTablePrintsRowsAndFailsOnAFailedScenario(t *testing.T) {
	t.Parallel()
	report := `{"scenario":"2. b","load":"x","faults":"y","bad_inputs":-1,"rows_lost":0,"duplicates":3,"secrets_found":0,"figures":["took 1 s"]}
{"scenario":"1. a | pipe","load":"l","faults":"f","bad_inputs":5,"rows_lost":-1,"duplicates":-1,"secrets_found":0,"pending":["pending: x: y"]}
`
	rows, err := read(strings.NewReader(report))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, "1. a | pipe", rows[0].Scenario, "rows are sorted by scenario")

	var out bytes.Buffer
	require.False(t, write(&out, rows))
	table := out.String()
	require.Contains(t, table, `| 1. a \| pipe | l | f | 5 | n/a | n/a | 0 | pass, 1 pending |`)
	require.Contains(t, table, "| 2. b | x | y | n/a | 0 | 3 | 0 | pass |")
	require.Contains(t, table, "- 2. b: took 1 s")
	require.Contains(t, table, "- 1. a | pipe: pending: x: y")

	rows[1].Failed = true
	out.Reset()
	require.True(t, write(&out, rows), "a failed scenario fails the table")
	require.Contains(t, out.String(), "**FAIL**")
}

func TestTableRefusesAMalformedReport(t *testing.T) {
	t.Parallel()
	_, err := read(strings.NewReader("{not json\n"))
	require.Error(t, err)
}
