package surface_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/switchboard/notify/faults"
)

// rows collects the three scenarios' rows; TestMain writes them once
// every test ran.
var rows = struct {
	sync.Mutex
	byName  map[string]*faults.Row
	pending faults.Pending
}{byName: map[string]*faults.Row{}}

// row returns the scenario's row, made on first use.
func row(scenario string, init func(*faults.Row)) *faults.Row {
	rows.Lock()
	defer rows.Unlock()
	r, ok := rows.byName[scenario]
	if !ok {
		r = &faults.Row{Scenario: scenario, RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable, BadInputs: faults.NotApplicable}
		init(r)
		rows.byName[scenario] = r
	}
	return r
}

// update changes a row under the lock.
func update(scenario string, fn func(*faults.Row)) {
	r := row(scenario, func(*faults.Row) {})
	rows.Lock()
	defer rows.Unlock()
	fn(r)
}

func TestMain(m *testing.M) {
	code := m.Run()
	// A run of one fuzzer (go test -fuzz, make faults-fuzz) reports no row:
	// its inputs run in worker processes, and go test prints its result.
	if tried := hostileTried.Load(); tried > 0 {
		update(scenarioHostile, func(r *faults.Row) {
			r.BadInputs = int(tried + fuzzInputs.Load())
			r.Load = fmt.Sprintf("%d fuzz seed inputs (5 targets of this package), %d hostile requests", fuzzInputs.Load(), tried)
			r.Figures = append(r.Figures, fmt.Sprintf("make faults-fuzz then fuzzes all %d targets of the module for FAULTS_FUZZTIME "+
				"(60 s in make faults, 5 s in CI): row 6b", len(faults.FuzzTargets)))
		})
	}
	rows.Lock()
	notes := rows.pending.Notes()
	for _, r := range rows.byName {
		r.Failed = r.Failed || code != 0
		for _, n := range notes {
			if pendingBelongs(r.Scenario, n) {
				r.Pending = append(r.Pending, n)
			}
		}
		if err := faults.ReportRow(*r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	rows.Unlock()
	os.Exit(code)
}
