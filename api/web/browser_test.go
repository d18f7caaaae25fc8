package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/sinks/sinktest"
)

// browserStepTimeout bounds one browser step (wall time): generous, since
// the race detector and other parallel tests share a small machine.
const browserStepTimeout = 60 * time.Second

// chromiumPaths are where Debian and others put the browser.
var chromiumPaths = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// startBrowser starts headless Chromium for t, stopped at cleanup. When no
// browser can be found or started, the test fails under CI=true (it never
// skips in CI) and is skipped elsewhere, saying how to install one.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser test: %s; CI=true, so this fails instead of skipping (install it: apt-get install -y chromium)", msg)
		}
		t.Skipf("browser test skipped: %s; install Chromium (apt-get install -y chromium) to run it", msg)
	}
	var path string
	for _, name := range chromiumPaths {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		unavailable("no Chromium found on PATH (looked for %s)", strings.Join(chromiumPaths, ", "))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// Without these, Chromium calls home at start, which a closed
		// network refuses many times over.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1200, 900),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; it must have no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		unavailable("Chromium at %s did not start: %v", path, err)
	}
	return ctx
}

// step runs browser actions with a timeout.
func step(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...))
}

// submit runs actions that submit a form and waits for the page they load;
// it returns that page's HTTP status.
func submit(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) int64 {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	res, err := chromedp.RunResponse(sctx, actions...)
	require.NoError(t, err)
	return res.Status
}

// text reads an element's text once it is visible.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	require.NoError(t, err)
	return v
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Location())
	require.NoError(t, err)
	return v
}

// TestBrowserSendTest drives the UI in headless Chromium: sign in with a
// one-time link, create a Gotify connection and a sink through the forms,
// press send test and see success; then a form on another origin posting to
// the sink's delete is refused.
func TestBrowserSendTest(t *testing.T) {
	// Scenario: Test message
	t.Parallel()
	ctx := startBrowser(t)
	b := setup(t)
	gotify := sinktest.NewServer(t, nil)
	const token = "gtfya.BrowserToken42"
	id := b.f.Human("Ada Lovelace")
	me := hostid.Human(id)

	// Sign in.
	step(t, ctx, chromedp.Navigate(b.srv.URL+"/login/"+b.loginLink(t, id)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("sign-in"))))
	require.Equal(t, b.srv.URL+"/sinks", location(t, ctx))
	require.True(t, strings.HasPrefix(text(t, ctx, "main h2"), "Sinks of Ada Lovelace ("), "the human's name, not an id")

	// A Gotify connection, through the form.
	step(t, ctx,
		chromedp.Navigate(b.srv.URL+"/connections"),
		chromedp.SetValue(chromedp.ID("conn-name"), "home gotify"),
		chromedp.SetValue(chromedp.ID("conn-url"), gotify.URL),
		chromedp.SendKeys(chromedp.ID("conn-secret"), token),
	)
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-connection-button"))))
	require.Contains(t, text(t, ctx, "table"), "home gotify")
	conns, err := b.eng.ListConnections(b.ctx, engine.HumanPrincipal(hostid.String(id)), me)
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.True(t, conns[0].HasSecret)

	// A sink on it, through the form.
	step(t, ctx,
		chromedp.Navigate(b.srv.URL+"/sinks"),
		chromedp.SendKeys(chromedp.ID("sink-name"), "phone"),
		chromedp.SetValue(chromedp.ID("sink-connection"), strconv.FormatInt(conns[0].ID, 10)),
	)
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("create-sink-button"))))
	sinks, err := b.eng.ListSinks(b.ctx, engine.HumanPrincipal(hostid.String(id)), me)
	require.NoError(t, err)
	require.Len(t, sinks, 1)
	sinkURL := b.srv.URL + "/sinks/" + strconv.FormatInt(sinks[0].ID, 10)
	require.Equal(t, sinkURL+"?notice=sink_created", location(t, ctx))

	// A subscription, so the page shows one.
	step(t, ctx, chromedp.Click(chromedp.CSS(`input[name="event_types"][value="todo.dead_lettered"]`)))
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("add-subscription-button"))))

	// Send test: one message arrives, and the page says so.
	require.EqualValues(t, http.StatusOK, submit(t, ctx, chromedp.Click(chromedp.ID("send-test"))))
	require.Equal(t, "Test message delivered.", text(t, ctx, "#test-result"))
	reqs := gotify.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "/message", reqs[0].Path)
	require.Empty(t, reqs[0].RawQuery, "the token stays out of the URL")
	require.Equal(t, token, reqs[0].Header.Get("X-Gotify-Key"))
	var msg struct {
		Title string `json:"title"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &msg))
	require.Equal(t, "Switchboard test message", msg.Title)
	require.Contains(t, text(t, ctx, "#deliveries"), "test message")

	// Another origin's page posts a form to our delete: refused, and the
	// sink stays. The browser sends its session cookie along (the two
	// origins are the same site), so the origin check alone refuses it.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>You won</title>
<form method="post" action="%s/delete"><button id="claim" type="submit">Claim your prize</button></form>`, sinkURL)
	}))
	t.Cleanup(attacker.Close)
	step(t, ctx, chromedp.Navigate(attacker.URL))
	require.EqualValues(t, http.StatusForbidden, submit(t, ctx, chromedp.Click(chromedp.ID("claim"))))
	require.Contains(t, text(t, ctx, "#refusal"), "posted from another site")
	_, err = b.eng.GetSink(b.ctx, engine.HumanPrincipal(hostid.String(id)), sinks[0].ID)
	require.NoError(t, err, "the sink is still there")
	require.Equal(t, 1, b.count(t, "sinks"))

	// The session still works for our own pages.
	step(t, ctx, chromedp.Navigate(sinkURL))
	require.Equal(t, "phone", strings.Fields(text(t, ctx, "main section h2"))[0])
}

// axeSource is axe-core (testdata/axe, vendored with its licence), read
// once.
var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	return string(b), err
})

// axeViolation is one rule axe-core found broken on a page.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeCheck runs axe-core on the page loaded in ctx and fails t on any
// violation of impact serious or critical, listing each with the elements
// it is about. where names the page and width in the failure.
func axeCheck(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	src, err := axeSource()
	require.NoError(t, err, "axe-core is vendored in testdata/axe")
	sctx, cancel := context.WithTimeout(ctx, browserStepTimeout)
	defer cancel()
	_, err = chromedp.Run(sctx, chromedp.Evaluate[chromedp.Void](src+";undefined"))
	require.NoError(t, err)
	found, err := chromedp.Run(sctx, chromedp.Evaluate[[]axeViolation](`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({
			id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " ")),
		})))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	if len(found) > 0 {
		var b strings.Builder
		for _, v := range found {
			fmt.Fprintf(&b, "\n- %s (%s): %s", v.ID, v.Impact, v.Help)
			for _, n := range v.Nodes {
				fmt.Fprintf(&b, "\n    %s", n)
			}
		}
		t.Errorf("axe-core: %d serious or critical violations on %s:%s", len(found), where, b.String())
	}
}
