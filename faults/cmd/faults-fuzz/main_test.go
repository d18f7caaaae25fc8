package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/faults"
)

func TestExecsReadsGoTestsLastCount(t *testing.T) {
	t.Parallel()
	out := `fuzz: elapsed: 0s, gathering baseline coverage: 12/12 completed, now fuzzing with 2 workers
fuzz: elapsed: 3s, execs: 32486 (10820/sec), new interesting: 51 (total: 63)
fuzz: elapsed: 5s, execs: 51002 (0/sec), new interesting: 51 (total: 63)
PASS
ok  	github.com/switchboard/notify/engine/digest	5.103s`
	require.EqualValues(t, 51002, execs(out))
	require.Zero(t, execs("FAIL\n"), "no progress line: no input counted")
}

func TestSummaryCountsInputsAndFailsOnAFailedTarget(t *testing.T) {
	t.Parallel()
	parse := faults.FuzzTarget{Pkg: "./engine/digest", Name: "FuzzParse", What: "schedules"}
	rules := faults.FuzzTarget{Pkg: "./host", Name: "FuzzRuleSave", What: "rules"}
	row := summarise([]result{{target: parse, execs: 51002}, {target: rules, execs: 1234}}, 5*time.Second)
	require.False(t, row.Failed)
	require.Equal(t, 52236, row.BadInputs)
	require.Equal(t, "FuzzParse, FuzzRuleSave", row.Load)
	require.Contains(t, row.Scenario, "2 targets, 5s each")
	require.Equal(t, "FuzzParse (engine/digest, schedules): 51,002 inputs, no failure", row.Figures[0])

	row = summarise([]result{{target: parse, execs: 10, err: errors.New("exit status 1\nmore")}}, time.Second)
	require.True(t, row.Failed, "a failed target fails the row")
	require.Contains(t, row.Figures[0], "FAILED: exit status 1")
}

func TestEveryTargetNamedOnce(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, ft := range faults.FuzzTargets {
		require.False(t, seen[ft.Name], "%s listed twice", ft.Name)
		seen[ft.Name] = true
	}
}
