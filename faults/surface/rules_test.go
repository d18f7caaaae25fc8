package surface_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/notifytype"
)

// Row 6c (issue 18 item 8): the rule expressions that took the server to
// gigabytes, sent by an owner through the REST API and by an agent with the
// default grant through MCP, to every verb that saves or dry-runs rules.
// Those outside jq's checked subset are refused with invalid_argument
// naming the field and save nothing; those inside it that would grow
// without end fault in a dry run, which answers within its time budget.
// The server's heap is sampled throughout. Not parallel: the heap it
// measures is the process's, so no other test of the package runs beside it.
func TestRuleExpressionsCannotExhaustTheServer(t *testing.T) {
	s := newServer(t, serverOpts{})
	p := s.person(t)
	principal := engine.HumanPrincipal(hostid.String(p.id))
	hook, secret, err := s.deps.Webhooks.Create(s.w.Ctx, principal, host.WebhookInput{
		Owner: p.scope, Name: "forge", TrustedSenders: []string{"octocat"},
	})
	require.NoError(t, err)
	body := []byte(`{"sender":{"login":"octocat"},"s":"ab"}`)
	_, err = s.deps.Webhooks.Receive(s.w.Ctx, hook.ID, body, host.Sign(secret, host.NewMessageID(), s.w.Clock.Now(), body))
	require.NoError(t, err)
	_, cred, err := s.deps.Endpoints.Vend(s.w.Ctx, p.id, p.scope, "agent", notifytype.DefaultGrants)
	require.NoError(t, err)

	refusedAtSave := []string{
		`"x" * 1000000000`, `setpath([536870912]; 1)`, `.[536870912] = 1`, `[range(1e9)]`, `def f: f; f`,
		`[limit(1e9; repeat(.))]`, `reduce range(1e9) as $i (""; . + "x")`, `$ENV`,
	}
	chain := []string{`($s + $s) as $a0`}
	for i := 1; i < 40; i++ {
		chain = append(chain, fmt.Sprintf(`($a%d + $a%d) as $a%d`, i-1, i-1, i))
	}
	pairs := make([]string, 40) // 2^40 leaves, shared until printed
	for i := range pairs {
		pairs[i] = fmt.Sprintf(`[$p%d, $p%d] as $p%d`, i, i, i+1)
	}
	faultAtRun := []string{
		`.s as $s | ` + strings.Join(chain, " | ") + ` | $a39 | length > 0`,
		`(1e9) as $n | "x" * $n | length > 0`,
		`.s as $p0 | ` + strings.Join(pairs, " | ") + ` | $p40 | tostring | length > 0`,
	}

	// The heap, sampled while the attacks run.
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop, sampled := make(chan struct{}), sync.WaitGroup{}
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	rule := func(expr string) map[string]any {
		return map[string]any{"name": "attack", "expr": expr, "action": map[string]any{"drop": true}}
	}
	restRules := fmt.Sprintf("/api/v1/webhooks/%d/rules", hook.ID)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "faults-agent", Version: "0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: s.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: cred.Reveal(), base: tr}},
		MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer cs.Close()
	mcpCall := func(tool string, expr string) (isError bool, text string, took time.Duration) {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{
			"webhook_id": hook.ID, "rules": []map[string]any{rule(expr)},
		}})
		require.NoError(t, err)
		b, _ := json.Marshal(res)
		return res.IsError, string(b), time.Since(start)
	}
	restCall := func(method, path, expr string) (int, string, time.Duration) {
		in, _ := json.Marshal(map[string]any{"rules": []map[string]any{rule(expr)}})
		start := time.Now()
		status, out := s.do(t, request{method: method, path: path, token: p.token, body: string(in)})
		return status, out, time.Since(start)
	}

	var tries, refused, faulted int
	var slowest time.Duration
	for _, expr := range refusedAtSave {
		for _, call := range []func() (bool, string, time.Duration){
			func() (bool, string, time.Duration) {
				st, out, d := restCall(http.MethodPut, restRules, expr)
				return st == http.StatusBadRequest, out, d
			},
			func() (bool, string, time.Duration) {
				st, out, d := restCall(http.MethodPost, restRules+"/test", expr)
				return st == http.StatusBadRequest, out, d
			},
			func() (bool, string, time.Duration) { return mcpCall("set_webhook_rules", expr) },
			func() (bool, string, time.Duration) { return mcpCall("test_webhook_rules", expr) },
		} {
			tries++
			ok, out, took := call()
			slowest = max(slowest, took)
			if ok && strings.Contains(out, "invalid_argument") && strings.Contains(out, "rules[0].expr") &&
				strings.Contains(out, "checked subset of jq") {
				refused++
			} else {
				t.Errorf("%s was not refused at save: %s", expr, out)
			}
		}
	}
	for _, expr := range faultAtRun {
		for _, call := range []func() (bool, string, time.Duration){
			func() (bool, string, time.Duration) {
				st, out, d := restCall(http.MethodPost, restRules+"/test", expr)
				return st == http.StatusOK, out, d
			},
			func() (bool, string, time.Duration) {
				isErr, out, d := mcpCall("test_webhook_rules", expr)
				return !isErr, out, d
			},
		} {
			tries++
			ok, out, took := call()
			slowest = max(slowest, took)
			if ok && strings.Contains(out, "past the rules' limit") {
				faulted++
			} else {
				t.Errorf("%s did not fault in a dry run: %s", expr, out)
			}
		}
	}
	close(stop)
	sampled.Wait()
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	rules, err := s.deps.Webhooks.Rules(s.w.Ctx, principal, hook.ID)
	require.NoError(t, err)
	saved := len(slices.DeleteFunc(rules, func(r host.Rule) bool { return r.Name != "attack" }))

	require.Zero(t, saved, "nothing refused was saved")
	require.Less(t, growth, int64(256<<20), "the server's heap grew by %d MiB", growth>>20)
	require.Less(t, slowest, 10*time.Second, "every call answers")
	faults.Report(t, faults.Row{
		Scenario:  "6c. rule expressions that would exhaust the server (issue 18 item 8)",
		Load:      fmt.Sprintf("%d calls: REST save and dry run by an owner, MCP set and test by a default-grant agent", tries),
		Faults:    "one-step allocations (string repeat, setpath/index assignment at 2^29), unbounded generators, recursion, $ENV, a 40-step doubling chain, a repeat by variable, nested self-pairs",
		BadInputs: tries, RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable,
		SecretsFound: strings.Count(s.w.Logs.String(), secret.Reveal()),
		Figures: []string{fmt.Sprintf("%d refused at save (invalid_argument on rules[0].expr), %d faulted in a dry run, 0 saved; "+
			"peak heap growth %.1f MiB; slowest answer %v", refused, faulted, float64(growth)/(1<<20), slowest.Round(time.Millisecond))},
	})
}
