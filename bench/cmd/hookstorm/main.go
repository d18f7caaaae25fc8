// Command hookstorm measures what a quarantine storm through POST /hooks/{id}
// costs the host, against the bare host transaction of emitratio measured
// in the same run: one untrusted sender posting to one webhook, so every
// delivery is quarantined and emits delivery.quarantined on one dedup key
// (the storm of REQ-11's scenario). Variants, serial on one connection:
//
//   - bare: emitratio's reference-host transaction (UPDATE a todo, INSERT
//     its attempt, COMMIT);
//   - emit_1_sink: the same with engine.Emit of a dead letter (one sink);
//   - hooks_receive: host.Webhooks.Receive of a signed 1 KiB delivery
//     (signature check, JSON, sender expression, then one transaction: the
//     delivery's insert and the quarantine event's);
//   - hooks_http: the same delivery POSTed to /hooks/{id} on an httptest
//     server over loopback (net/http on both sides added).
//
// Variants take turns of -chunk within a round, order reversed every other
// round; figures are medians over rounds. It creates and drops a fresh
// database on the server of DATABASE_URL, as emitratio does.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/notify/api/hooks"
	"github.com/switchboard/notify/api/httpx"
	"github.com/switchboard/notify/bench/internal/benchdb"
	"github.com/switchboard/notify/bench/internal/workload"
	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/hosttest"
	"github.com/switchboard/notify/internal/testhooks"
	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/store/storetest"
)

var (
	rounds = flag.Int("rounds", 5, "rounds of every variant")
	n      = flag.Int("n", 600, "transactions (or deliveries) per variant per round")
	chunk  = flag.Int("chunk", 50, "per turn: within a round the variants take turns of this many")
	keep   = flag.Bool("keep", false, "keep the database at the end, to inspect")
)

// target: time(hooks_receive)/time(bare) at most this, so a quarantined
// delivery costs the host about what one event costs (emit_1_sink's target
// in emitratio is 1.35).
const target = 1.35

type variant string

const (
	bare         variant = "bare"
	emit1        variant = "emit_1_sink"
	hooksReceive variant = "hooks_receive"
	hooksHTTP    variant = "hooks_http"
)

var variants = []variant{bare, emit1, hooksReceive, hooksHTTP}

func main() {
	flag.Parse()
	if *rounds < 1 || *n < 1 || *chunk < 1 {
		fmt.Fprintln(os.Stderr, "hookstorm: -rounds, -n and -chunk must be at least 1")
		os.Exit(2)
	}
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "hookstorm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	dbURL, drop, err := benchdb.Create(ctx, cmp.Or(os.Getenv("DATABASE_URL"), benchdb.DefaultAdminURL))
	if err != nil {
		return err
	}
	defer func() {
		if *keep {
			fmt.Printf("\ndatabase kept: %s\n", dbURL)
			return
		}
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	pool, err := workload.OpenPool(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := host.Migrate(ctx, pool); err != nil {
		return err
	}
	if err := workload.MigrateRiver(ctx, pool); err != nil {
		return fmt.Errorf("error migrating River: %w", err)
	}
	f := hosttest.NewFactory(panicTB{}, pool)
	w, err := workload.Setup(ctx, pool, f)
	if err != nil {
		return err
	}

	// The storm's webhook: one owner, one sink subscribed to quarantines.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	eng, err := engine.New(engine.Config{Pool: pool, Directory: host.NewDirectory(pool), Events: host.Events(), Links: host.Links()})
	if err != nil {
		return err
	}
	svc := host.NewWebhooks(host.WebhooksConfig{Pool: pool, Emitter: eng, SecretKey: key})
	human := f.Human("")
	owner := hostid.Human(human)
	sink := f.Sink(storetest.SinkOpts{Owner: owner})
	f.Subscription(storetest.SubscriptionOpts{Sink: sink, EventTypes: []notifytype.EventType{host.EventDeliveryQuarantined}})
	hook, secret, err := svc.Create(ctx, engine.HumanPrincipal(hostid.String(human)), host.WebhookInput{Owner: owner, Name: "forge", TrustedSenders: []string{"octocat"}})
	if err != nil {
		return err
	}
	body := []byte(`{"action":"opened","sender":{"login":"mallory"},"repository":{"full_name":"acme/forge"},` +
		`"issue":{"number":7,"title":"free money","body":"` + strings.Repeat("spam ", 180) + `"}}`)
	// Each delivery is its own message: a fresh webhook-id (a repeated one
	// is answered as a duplicate and does nothing).
	sign := func() host.Envelope { return host.Sign(secret, host.NewMessageID(), time.Now(), body) }
	srv := httptest.NewServer(hooks.New(httpx.Deps{Webhooks: svc, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	url := fmt.Sprintf("%s/hooks/%d", srv.URL, hook.ID)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	once := func(v variant, count int) (time.Duration, error) {
		start := time.Now()
		for range count {
			switch v {
			case bare:
				err = w.HostTx(ctx, workload.Bare)
			case emit1:
				err = w.HostTx(ctx, workload.Emit1Sink)
			case hooksReceive:
				var got host.Received
				got, err = svc.Receive(ctx, hook.ID, body, sign())
				if err == nil && got.Outcome != host.OutcomeQuarantined {
					err = fmt.Errorf("outcome %s, want quarantined", got.Outcome)
				}
			case hooksHTTP:
				err = post(client, url, body, sign())
			}
			if err != nil {
				return 0, fmt.Errorf("%s: %w", v, err)
			}
		}
		return time.Since(start), nil
	}

	var version string
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return err
	}
	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("server:  %s\n", version)
	fmt.Printf("run:     %d rounds; %d per variant per round in turns of %d; delivery body %d bytes\n\n", *rounds, *n, *chunk, len(body))

	for _, v := range variants { // warm-up
		if _, err := once(v, max(*n/10, 1)); err != nil {
			return err
		}
	}
	took := map[variant][]time.Duration{}
	for r := range *rounds {
		turns := slices.Clone(variants)
		if r%2 == 1 {
			slices.Reverse(turns)
		}
		round := map[variant]time.Duration{}
		for done := 0; done < *n; done += *chunk {
			for _, v := range turns {
				d, err := once(v, min(*chunk, *n-done))
				if err != nil {
					return err
				}
				round[v] += d
			}
		}
		fmt.Printf("round %d:", r+1)
		for _, v := range variants {
			took[v] = append(took[v], round[v])
			fmt.Printf("  %s %.0f/s", v, float64(*n)/round[v].Seconds())
		}
		fmt.Println()
	}
	ratio := func(v variant) float64 {
		rs := make([]float64, *rounds)
		for r := range rs {
			rs[r] = took[v][r].Seconds() / took[bare][r].Seconds()
		}
		return benchdb.Median(rs)
	}
	fmt.Printf("\n%-14s %12s %10s %s\n", "variant", "median op/s", "time/bare", "target")
	for _, v := range variants {
		rates := make([]float64, *rounds)
		for r := range rates {
			rates[r] = float64(*n) / took[v][r].Seconds()
		}
		t := ""
		if v == hooksReceive {
			t = fmt.Sprintf("<= %.2f  %s", target, map[bool]string{true: "PASS", false: "FAIL"}[ratio(v) <= target])
		}
		fmt.Printf("%-14s %12.0f %9.2fx %s\n", v, benchdb.Median(rates), ratio(v), t)
	}

	// The check: every delivery was quarantined, and the storm's events
	// fan out into one open row for the sink.
	if _, err := testhooks.FanOut(ctx, eng); err != nil {
		return err
	}
	var deliveries, rows, count int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_deliveries WHERE outcome = 'quarantined'),
		(SELECT count(*) FROM switchboard.outbox WHERE sink_id = $1), (SELECT coalesce(sum(count), 0) FROM switchboard.outbox WHERE sink_id = $1)`, sink).
		Scan(&deliveries, &rows, &count); err != nil {
		return err
	}
	if rows != 1 || count != deliveries {
		return fmt.Errorf("check: %d quarantined deliveries made %d outbox rows counting %d, want 1 row counting all", deliveries, rows, count)
	}
	fmt.Printf("\ncheck: %d quarantined deliveries, 1 open outbox row counting %d: ok\n", deliveries, count)
	return nil
}

func post(c *http.Client, url string, body []byte, sig host.Envelope) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	sig.Set(req.Header)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /hooks: %s", resp.Status)
	}
	return nil
}

// panicTB lets hosttest.Factory build fixtures here: Fatalf panics.
type panicTB struct{ testing.TB }

func (panicTB) Helper() {}

func (panicTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
