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

// Only a bare deadline with no failing input written is Go's coordinator
// race (go.dev/issue/75804); anything else a run printed, or an input it
// wrote, is the target's failure.
func TestCoordinatorRaceIsOnlyABareDeadlineWithNoInputWritten(t *testing.T) {
	raced := "fuzz: elapsed: 1m0s, execs: 242270 (0/sec), new interesting: 12 (total: 160)\n--- FAIL: FuzzRender (61.10s)\n    context deadline exceeded\nFAIL\nexit status 1\n"
	crashed := "--- FAIL: FuzzRender (0.21s)\n    --- FAIL: FuzzRender (0.00s)\n        testing.go:1591: panic: runtime error: index out of range\n" +
		"    Failing input written to testdata/fuzz/FuzzRender/4f1c\nFAIL\n"
	if !coordinatorRace(raced, 0) {
		t.Error("a bare deadline with no input written is the coordinator's race")
	}
	if coordinatorRace(raced, 1) {
		t.Error("a run that wrote a failing input failed, whatever it printed")
	}
	if coordinatorRace(crashed, 0) || coordinatorRace(crashed, 1) {
		t.Error("a panic in the target is the target's failure")
	}
}
