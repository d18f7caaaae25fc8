package surface_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/engine"
	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host"
	"github.com/switchboard/notify/host/hostid"
	"github.com/switchboard/notify/host/rulesandbox"
)

// processRSS is this process's resident memory (the server's: it runs in
// the test process; rule workers are processes of their own).
func processRSS(t testing.TB) uint64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return n << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Row 6d (issue 24 items 1 to 3): one owner attacks the rule workers with
// eight dry runs of hostile rules at once through the REST API (a regex
// that cannot be interrupted, the one-step division and split of a stored
// 250 KB delivery, and what rulesandbox's generator finds) and, beside
// them, eight deliveries of 250 KB at once to a webhook whose saved rules
// are the same hostile ones. Meanwhile another owner's deliveries, routed
// by its own rules, go one after another. The server's RSS stays under
// 300 MB, every dry run answers under 2 s, and each of the other owner's
// deliveries under 100 ms.
//
// The other owner sends one delivery at a time: what the row bounds is
// what the attack costs it. Eight of its own at once through the harness's
// pool of four connections took 92-106 ms with no attack at all on a
// loaded 2-core machine (session 6), which measured its own burst.
// Not parallel: the RSS it measures is the process's.
func TestHostileDryRunsCannotStarveTheServerOrAnotherOwner(t *testing.T) {
	s := newServer(t, serverOpts{})
	attacker, victim := s.person(t), s.person(t)
	hookA, secretA, err := s.deps.Webhooks.Create(s.w.Ctx, engine.HumanPrincipal(hostid.String(attacker.id)), host.WebhookInput{
		Owner: attacker.scope, Name: "forge", TrustedSenders: []string{"octocat"},
	})
	require.NoError(t, err)
	hookB, secretB, err := s.deps.Webhooks.Create(s.w.Ctx, engine.HumanPrincipal(hostid.String(victim.id)), host.WebhookInput{
		Owner: victim.scope, Name: "forge", TrustedSenders: []string{"octocat"},
	})
	require.NoError(t, err)
	_, err = s.deps.Webhooks.SetRules(s.w.Ctx, engine.HumanPrincipal(hostid.String(victim.id)), hookB.ID, []host.RuleInput{
		{Name: "opened", Expr: `.action == "opened"`, Action: host.RuleAction{Drop: true}},
		{Name: "title", Expr: `.issue.title | test("red")`, Action: host.RuleAction{Drop: true}},
	})
	require.NoError(t, err)
	// The attacker's stored deliveries: 250 KB, and a 10 KB field.
	big := `{"sender":{"login":"octocat"},"s":"` + strings.Repeat("ab", 125_000) + `","p":"x"}`
	for _, body := range []string{
		big,
		`{"sender":{"login":"octocat"},"s":"ab","p":"` + strings.Repeat("a", 10_000) + `"}`,
	} {
		_, err := s.deps.Webhooks.Receive(s.w.Ctx, hookA.ID, []byte(body), host.Sign(secretA, host.NewMessageID(), s.w.Clock.Now(), []byte(body)))
		require.NoError(t, err)
	}
	hostile := []string{
		`.p // "" | test("` + strings.Repeat(`(?:.?){1000}`, 30) + `z")`,
		`(.s * 15) / "" | length > 0`,
		`.s * 15 | split("") | length > 0`,
		`[.s / "" | .[] | . + .] | length > 0`,
		`[.s * 7 | ascii_downcase | . / "" | .[] | {(.): .}] | length > 0`,
	}
	// The same rules saved on a second webhook of the attacker's, which
	// its deliveries run through. A save compiles in a worker within its
	// own bound; a rule it refuses is left out (the others are saved).
	hookS, secretS, err := s.deps.Webhooks.Create(s.w.Ctx, engine.HumanPrincipal(hostid.String(attacker.id)), host.WebhookInput{
		Owner: attacker.scope, Name: "saved", TrustedSenders: []string{"octocat"},
	})
	require.NoError(t, err)
	var saved []host.RuleInput
	for i, e := range hostile {
		in := host.RuleInput{Name: "attack" + strconv.Itoa(i), Expr: e, Action: host.RuleAction{Drop: true}}
		if _, err := s.deps.Webhooks.SetRules(s.w.Ctx, engine.HumanPrincipal(hostid.String(attacker.id)), hookS.ID, append(slices.Clone(saved), in)); err == nil {
			saved = append(saved, in)
		}
	}
	require.NotEmpty(t, saved, "some hostile rule is saved")
	rounds := 1
	if faults.Full() {
		rounds = 5
	}

	base := processRSS(t)
	var peakRSS atomic.Uint64
	stop, sampled := make(chan struct{}), sync.WaitGroup{}
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if r := processRSS(t); r > peakRSS.Load() {
				peakRSS.Store(r)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	rules := make([]map[string]any, len(hostile))
	for i, e := range hostile {
		rules[i] = map[string]any{"name": "attack" + strconv.Itoa(i), "expr": e, "action": map[string]any{"drop": true}}
	}
	dryRun, _ := json.Marshal(map[string]any{"rules": rules})
	var mu sync.Mutex
	var dryTimes, deliveryTimes []time.Duration
	var faulted, routed, answered, attacks int
	probe := func(n int) time.Duration {
		body := []byte(fmt.Sprintf(`{"action":"opened","sender":{"login":"octocat"},"issue":{"number":%d,"title":"red"}}`, n))
		start := time.Now()
		got, err := s.deps.Webhooks.Receive(s.w.Ctx, hookB.ID, body, host.Sign(secretB, host.NewMessageID(), s.w.Clock.Now(), body))
		took := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && got.Outcome == host.OutcomeDropped {
			routed++
		} else {
			d, _ := s.deps.Webhooks.Delivery(s.w.Ctx, engine.HumanPrincipal(hostid.String(victim.id)), hookB.ID, got.DeliveryID)
			t.Errorf("the other owner's delivery: %v %+v, after %v: %+v", err, got, took, d.Trace)
		}
		return took
	}
	// probeWhile sends the other owner's deliveries one after another
	// until attack returns (at least 8), into times.
	probes := 0
	probeWhile := func(times *[]time.Duration, attack func()) {
		done := make(chan struct{})
		go func() { attack(); close(done) }()
		for i := 0; ; i++ {
			select {
			case <-done:
				if i >= 8 {
					return
				}
			default:
			}
			took := probe(probes)
			probes++
			mu.Lock()
			*times = append(*times, took)
			mu.Unlock()
		}
	}
	// eightAtOnce runs f eight times at once and waits for them.
	eightAtOnce := func(f func()) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(f)
		}
		wg.Wait()
	}
	var beside []time.Duration // the probes beside the attacker's deliveries
	var slowestAttack time.Duration
	for range rounds {
		probeWhile(&deliveryTimes, func() {
			eightAtOnce(func() {
				start := time.Now()
				status, out := s.do(t, request{method: http.MethodPost, path: fmt.Sprintf("/api/v1/webhooks/%d/rules/test", hookA.ID),
					token: attacker.token, body: string(dryRun)})
				took := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				dryTimes = append(dryTimes, took)
				switch {
				case status == http.StatusOK:
					answered++
					faulted += strings.Count(out, `"fault":`)
				case status == http.StatusBadRequest && (strings.Contains(out, "could not be compiled within the rules' limits") ||
					strings.Contains(out, "was not compiled: not run: the rules' time budget ran out")):
					// A hostile candidate whose compiling ran past the
					// dry run's bound, or did not get one of the owner's
					// workers within it (behind the owner's other dry
					// runs), is refused, naming it: an answer, and the
					// bound holding (a busy machine gets here: ci2 of
					// session 6, -race beside a CPU burner).
					answered++
					faulted++
				default:
					t.Errorf("dry run: %d %s", status, out)
				}
			})
		})
		// The same rules on eight 250 KB deliveries at once: the rules'
		// bounds hold as for dry runs. The other owner's deliveries
		// beside them are a figure, not bounded here: eight 250 KB rows
		// committed at once delay any commit (the WAL), rules or not.
		probeWhile(&beside, func() {
			eightAtOnce(func() {
				start := time.Now()
				_, err := s.deps.Webhooks.Receive(s.w.Ctx, hookS.ID, []byte(big), host.Sign(secretS, host.NewMessageID(), s.w.Clock.Now(), []byte(big)))
				took := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("the attacker's delivery: %v", err)
				}
				attacks++
				slowestAttack = max(slowestAttack, took)
			})
		})
	}
	close(stop)
	sampled.Wait()

	slowestDry, slowestDelivery := slices.Max(dryTimes), slices.Max(deliveryTimes)
	slices.Sort(deliveryTimes)
	p50, p99 := deliveryTimes[len(deliveryTimes)/2], deliveryTimes[len(deliveryTimes)*99/100]
	slices.Sort(beside)
	besideP50, besideMax := beside[len(beside)/2], beside[len(beside)-1]
	peak := peakRSS.Load()
	limits := rulesandbox.Default().Limits()
	st := rulesandbox.Default().Stats()
	row := faults.Row{
		Scenario: "6d. hostile rule dry runs against the rule workers (issue 24 items 1-3)",
		Load: fmt.Sprintf("%d × (8 concurrent REST dry runs of %d hostile rules over a 250 KB and a 10 KB stored delivery, by one owner, "+
			"then 8 concurrent 250 KB deliveries of its through %d saved hostile rules; another owner's deliveries one after another "+
			"throughout: %d)", rounds, len(hostile), len(saved), probes),
		Faults:    "an uninterruptible literal regex, one-step division/split/splits of a 3.75 MB string, per-character concatenation",
		BadInputs: 8 * rounds * len(hostile), RowsLost: faults.NotApplicable, Duplicates: faults.NotApplicable,
		Figures: []string{fmt.Sprintf("server RSS %d → %d MiB peak; slowest dry run %v; the other owner's %d deliveries beside them: "+
			"p50 %v, p99 %v, slowest %v; slowest attacking delivery %v (the other owner's %d beside them: p50 %v, slowest %v); "+
			"%d rule faults; workers: %d spawned, %d killed (limits: %d MiB, %d per owner, %d in all)",
			base>>20, peak>>20, slowestDry.Round(time.Millisecond), len(deliveryTimes), p50.Round(100*time.Microsecond),
			p99.Round(100*time.Microsecond), slowestDelivery.Round(time.Millisecond), slowestAttack.Round(time.Millisecond),
			len(beside), besideP50.Round(100*time.Microsecond), besideMax.Round(time.Millisecond), faulted,
			st.Spawned, st.Killed, limits.Memory>>20, limits.PerOwner, limits.Workers)},
	}
	assert.Equal(t, 8*rounds, answered, "every dry run answers")
	assert.Equal(t, probes, routed, "every other owner's delivery is routed by its rules")
	assert.Equal(t, 8*rounds, attacks, "every attacking delivery is answered")
	assert.Positive(t, faulted, "the hostile rules fault")
	assert.Less(t, peak, uint64(300<<20), "the server's RSS reached %d MiB", peak>>20)
	// The bounds hold in the full run (make faults, no race
	// detector). The short run (make test: -race, race-built workers
	// several times slower, the CI box) checks that nothing stalls: every
	// answer well inside the 30 s a dry run took on e6a7fa7.
	dryBound, deliveryBound := 2*time.Second, 100*time.Millisecond
	if !faults.Full() {
		dryBound, deliveryBound = 10*time.Second, 5*time.Second
	}
	assert.Less(t, slowestDry, dryBound, "every dry run answers under %v", dryBound)
	assert.Less(t, slowestAttack, dryBound, "every attacking delivery answers under %v", dryBound)
	assert.Less(t, slowestDelivery, deliveryBound, "the other owner's deliveries beside the dry runs answer under %v", deliveryBound)
	row.Failed = t.Failed()
	faults.Report(t, row)
}
