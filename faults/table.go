package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// ReportEnv names the file every scenario appends its row to, as one JSON
// object a line (make faults sets it; cmd/faults-table prints the table).
// Unset, rows only go to the test log.
const ReportEnv = "SWITCHBOARD_FAULTS_REPORT"

// FullEnv switches the scenarios to their full size (make faults sets it):
// 10,000 rows in the crash run, longer loads. Unset, each runs its short
// version, sized for CI.
const FullEnv = "SWITCHBOARD_FAULTS_FULL"

// NotApplicable marks a figure a scenario does not measure.
const NotApplicable = -1

// Row is one line of the table.
type Row struct {
	// Scenario names what was done, "1. process crash (3 × serve, SIGKILL)".
	Scenario string `json:"scenario"`
	// Load says what was held while the faults hit: rows drained,
	// requests sent.
	Load string `json:"load"`
	// Faults lists the faults injected.
	Faults string `json:"faults"`
	// BadInputs is how many hostile inputs were tried (NotApplicable when
	// none were).
	BadInputs int `json:"bad_inputs"`
	// RowsLost is how many outbox rows were neither delivered nor recorded
	// undeliverable (must be 0), NotApplicable when no row was in play.
	RowsLost int `json:"rows_lost"`
	// Duplicates is how many deliveries a receiver saw more than once.
	Duplicates int `json:"duplicates"`
	// SecretsFound is how many times a planted secret appeared anywhere
	// the scenario searched (must be 0).
	SecretsFound int `json:"secrets_found"`
	// Figures are further measurements, "claims recovered in 2.1 s".
	Figures []string `json:"figures,omitempty"`
	// Pending lists checks of this scenario that wait on a feature not yet
	// on main: "pending: <check>: <reason>".
	Pending []string `json:"pending,omitempty"`
	// Failed reports that a check of the scenario failed.
	Failed bool `json:"failed,omitempty"`
}

var reportMu sync.Mutex

// Report writes r to the test log and, when ReportEnv names a file,
// appends it there. Failed is taken from t when the scenario failed.
func Report(t testing.TB, r Row) {
	t.Helper()
	r.Failed = r.Failed || t.Failed()
	if err := ReportRow(r); err != nil {
		t.Error(err)
	}
}

// ReportRow writes r to standard output and, when ReportEnv names a file,
// appends it there: for a scenario that writes its row from TestMain,
// after all of its tests ran.
func ReportRow(r Row) error {
	fmt.Printf("faults row: %s\n", r.Line())
	path := os.Getenv(ReportEnv)
	if path == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("error encoding the faults row: %w", err)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("error opening the faults report: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("error writing the faults report: %w", err)
	}
	return nil
}

// Line is the row as one line of text, for logs.
func (r Row) Line() string {
	return fmt.Sprintf("%s | load %s | faults %s | bad inputs %s | lost %s | duplicates %s | secrets %s | %s",
		r.Scenario, r.Load, r.Faults, Figure(r.BadInputs), Figure(r.RowsLost), Figure(r.Duplicates),
		Figure(r.SecretsFound), strings.Join(append(append([]string{}, r.Figures...), r.Pending...), "; "))
}

// Figure prints a count, "n/a" for NotApplicable.
func Figure(n int) string {
	if n == NotApplicable {
		return "n/a"
	}
	return fmt.Sprint(n)
}

// Full reports whether the full-size suite runs (FullEnv set).
func Full() bool { v := os.Getenv(FullEnv); return v != "" && v != "0" && v != "false" }
