package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchboard/notify/engine"
)

// runStatus is the status command: the running server's per-sink actor
// table, read from GET <SWITCHBOARD_BASE_URL>/ops/actors with the operator
// token SWITCHBOARD_API_TOKEN. Actor status lives in each serving
// instance's memory, so the command asks the instance.
func runStatus(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.APIToken == "" {
		return errors.New("SWITCHBOARD_API_TOKEN is not set: status needs an operator API token (switchboard-notify demo prints one)")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.BaseURL, "/")+"/ops/actors", nil)
	if err != nil {
		return fmt.Errorf("error building status request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cfg.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("error asking the server for its actors: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the server answered %s", resp.Status)
	}
	var body struct {
		Actors []engine.SinkStatus `json:"actors"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return fmt.Errorf("error reading the server's answer: %w", err)
	}
	return printStatus(stdout, body.Actors)
}

// printStatus writes the actor table.
func printStatus(w io.Writer, actors []engine.SinkStatus) error {
	if len(actors) == 0 {
		_, err := fmt.Fprintln(w, "no active actors")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tSTATE\tTOKENS\tHELD\tQUEUED\tIN FLIGHT\tNEXT WAKE\tLAST ERROR\tRESTARTS")
	for _, a := range actors {
		tokens := "-"
		if a.Tokens >= 0 {
			tokens = fmt.Sprintf("%.1f", a.Tokens)
		}
		wake := "-"
		if !a.NextWake.IsZero() {
			wake = a.NextWake.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\n", a.SinkID, a.State, tokens, a.Held, a.Queued,
			a.InFlight, wake, cmp.Or(string(a.LastClass), "-"), a.Restarts)
	}
	return tw.Flush()
}
