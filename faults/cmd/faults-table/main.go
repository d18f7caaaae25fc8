// Command faults-table prints the reliability suite's table (issue 11) as
// Markdown from the JSON lines the scenarios wrote (faults.ReportEnv):
//
//	faults-table report.jsonl
//
// It exits 1 when a scenario failed or when no row was written.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/switchboard/notify/faults"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: faults-table <report.jsonl>")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "error opening the report: %v\n", err)
		os.Exit(1)
	}
	defer f.Close()
	rows, err := read(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error reading the report: %v\n", err)
		os.Exit(1)
	}
	failed := write(os.Stdout, rows)
	if len(rows) == 0 || failed {
		os.Exit(1)
	}
}

func read(r io.Reader) ([]faults.Row, error) {
	var rows []faults.Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var row faults.Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("error decoding a row: %w", err)
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Scenario < rows[j].Scenario })
	return rows, sc.Err()
}

// write prints the table and the notes under it, and reports whether a
// scenario failed.
func write(w io.Writer, rows []faults.Row) (failed bool) {
	fmt.Fprintln(w, "| scenario | load held | faults injected | bad inputs tried | rows lost | duplicates | secrets found | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	var notes []string
	for _, r := range rows {
		result := "pass"
		switch {
		case r.Failed:
			result, failed = "**FAIL**", true
		case len(r.Pending) > 0:
			result = fmt.Sprintf("pass, %d pending", len(r.Pending))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(r.Scenario), cell(r.Load), cell(r.Faults),
			faults.Figure(r.BadInputs), faults.Figure(r.RowsLost), faults.Figure(r.Duplicates), faults.Figure(r.SecretsFound), result)
		for _, f := range r.Figures {
			notes = append(notes, fmt.Sprintf("- %s: %s", short(r.Scenario), f))
		}
		for _, p := range r.Pending {
			notes = append(notes, fmt.Sprintf("- %s: %s", short(r.Scenario), p))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
	return failed
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func short(s string) string {
	if i := strings.Index(s, " ("); i > 0 {
		return s[:i]
	}
	return s
}
