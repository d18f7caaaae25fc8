package crash_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchboard/notify/faults"
	"github.com/switchboard/notify/host/hosttest"
)

// process is one running serve.
type process struct {
	cmd    *exec.Cmd
	logs   *logBuffer
	ready  chan struct{}
	exited chan error
}

// logBuffer keeps a process's output and signals when the engine is ready.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard-notify")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard/notify/cmd/switchboard-notify").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func start(t *testing.T, bin string, env []string) *process {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &process{cmd: cmd, logs: &logBuffer{}, ready: make(chan struct{}), exited: make(chan error, 1)}
	done := make(chan struct{})
	require.NoError(t, cmd.Start())
	var once sync.Once
	var wg sync.WaitGroup
	read := func(r io.Reader) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.mu.Lock()
			p.logs.lines = append(p.logs.lines, line)
			p.logs.mu.Unlock()
			if strings.Contains(line, "listening on") {
				once.Do(func() { close(p.ready) })
			}
		}
	}
	wg.Add(2)
	go read(stderr)
	go read(stdout)
	go func() { wg.Wait(); p.exited <- cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default: // a failed run leaves no process behind
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// Scenario 1: three serve processes, one SIGKILLed mid-drain.
func TestProcessCrashMidDrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rows, sinkCount := 1500, 12
	if faults.Full() {
		rows, sinkCount = 10_000, 24
	}
	var pending faults.Pending
	row := faults.Row{
		Scenario:  "1. process crash (3 × serve, SIGKILL one mid-drain)",
		Load:      fmt.Sprintf("%d due rows, %d sinks, 3 processes", rows, sinkCount),
		Faults:    "SIGKILL of one serve process",
		BadInputs: faults.NotApplicable, RowsLost: faults.NotApplicable,
	}
	defer func() { row.Pending = append(row.Pending, pending.Notes()...); faults.Report(t, row) }()

	t0 := time.Now()
	bin := buildBinary(t)
	t.Logf("built in %v", time.Since(t0))
	url := hosttest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	secrets := faults.PlantedSecrets()
	recv := faults.NewReceiver(t, secrets.GotifyToken)
	key, keyHex := faults.NewKey()
	sinks, err := faults.SeedSinks(ctx, pool, key, recv.URL, secrets.GotifyToken, sinkCount)
	require.NoError(t, err)

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"DATABASE_URL=" + url,
		"SWITCHBOARD_LISTEN=127.0.0.1:0",
		"SWITCHBOARD_SECRET_KEY=" + keyHex,
		"SWITCHBOARD_PUSH_ALLOW_HTTP=true",
		"SWITCHBOARD_PRIVATE_HOSTS=127.0.0.1/32",
		"SWITCHBOARD_LOG_FORMAT=json",
		// D27's settings (h-security); ignored by a binary that predates them.
		fmt.Sprintf("SWITCHBOARD_BUDGET_PER_HOUR_MAX=%d", faults.LiftedPerHour),
		fmt.Sprintf("SWITCHBOARD_BUDGET_BURST_MAX=%d", faults.LiftedBurst),
		fmt.Sprintf("SWITCHBOARD_MAX_SINKS=%d", sinkCount),
		"SWITCHBOARD_CLAIM_TTL=15s", // the shortest the binary accepts (an attempt takes up to 10 s)
	}
	procs := make([]*process, 3)
	for i := range procs {
		procs[i] = start(t, bin, env)
	}
	for i, p := range procs {
		select {
		case <-p.ready:
		case err := <-p.exited:
			t.Fatalf("serve %d exited before listening: %v\n%s", i, err, p.logs)
		case <-time.After(60 * time.Second):
			t.Fatalf("serve %d not listening after 60 s\n%s", i, p.logs)
		}
	}

	t.Logf("3 processes listening after %v", time.Since(t0))
	require.NoError(t, faults.InsertRows(ctx, pool, sinks, rows))
	began := time.Now()

	// Kill, once about a third of the rows arrived, the process holding the
	// most claims at that moment: a sink is delivered to by one instance at
	// a time, so with few sinks one process may hold them all while the
	// others wait. A process's claims carry its instance name,
	// engine.Config.Instance's default "<hostname>-<pid>-<6 random
	// characters>".
	claimsOf := func(p *process) string { return fmt.Sprintf("%%-%d-______", p.cmd.Process.Pid) }
	var (
		victim       *process
		victimClaims string
	)
	require.NoError(t, faults.WaitUntil(2*time.Minute, 20*time.Millisecond, func() (bool, error) {
		if recv.DistinctRows() < rows/3 {
			return false, nil
		}
		most := 0
		for _, p := range procs {
			var held int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE state = 'claimed' AND claimed_by LIKE $1`, claimsOf(p)).Scan(&held); err != nil {
				return false, err
			}
			if held > most {
				most, victim, victimClaims = held, p, claimsOf(p)
			}
		}
		return most > 0, nil
	}), "the drain did not reach a third with a process holding claims")
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	killedAt := time.Now()
	<-victim.exited

	// What the killed process held: the most it may have sent twice.
	claimed := map[int64]bool{}
	var ttlLeft time.Duration
	rs, err := pool.Query(ctx, `SELECT id, extract(epoch FROM claim_expires_at - now()) FROM switchboard.outbox
		WHERE state = 'claimed' AND claimed_by LIKE $1`, victimClaims)
	require.NoError(t, err)
	for rs.Next() {
		var (
			id   int64
			left float64
		)
		require.NoError(t, rs.Scan(&id, &left))
		claimed[id] = true
		ttlLeft = max(ttlLeft, time.Duration(left*float64(time.Second)))
	}
	require.NoError(t, rs.Err())
	t.Logf("killed serve pid %d holding %d claims (longest %v left)", victim.cmd.Process.Pid, len(claimed), ttlLeft)

	honoured := pending.Expect(t, "crash/claim-ttl-setting", ttlLeft <= 20*time.Second,
		"claims held for up to %v after SWITCHBOARD_CLAIM_TTL=15s", ttlLeft.Round(time.Second))
	if !honoured && !faults.Full() {
		// The short run cannot wait out the 2 min default: expire the
		// dead process's claims by the database clock, as time would.
		_, err := pool.Exec(ctx, `UPDATE switchboard.outbox SET claim_expires_at = now() WHERE state = 'claimed' AND claimed_by LIKE $1`, victimClaims)
		require.NoError(t, err)
		row.Figures = append(row.Figures, "short run: the killed process's claims were expired by hand (the 2 min default TTL is longer than CI allows)")
	}
	require.NoError(t, faults.WaitUntil(4*time.Minute, 50*time.Millisecond, func() (bool, error) {
		var left int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.outbox WHERE state = 'claimed' AND claimed_by LIKE $1`, victimClaims).Scan(&left)
		return left == 0, err
	}), "the killed process's claims were never taken over")
	recovered := time.Since(killedAt)

	if err := faults.WaitUntil(4*time.Minute, 50*time.Millisecond, func() (bool, error) {
		tally, err := faults.CountRows(ctx, pool)
		return tally.Open == 0, err
	}); err != nil {
		t.Fatalf("the outbox never drained: %v; open rows: %s", err, faults.DescribeOpen(ctx, pool))
	}
	drained := time.Since(began)

	seen, distinct, dups := recv.Counts()
	lost, err := faults.Lost(ctx, pool, seen)
	require.NoError(t, err)
	row.RowsLost, row.Duplicates = lost, dups
	tally, err := faults.CountRows(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, rows, tally.Total)
	require.Zero(t, lost, "rows lost: every row must be delivered or recorded undeliverable (%+v, %d seen)", tally, distinct)
	require.LessOrEqual(t, dups, len(claimed), "duplicates beyond the killed process's claims")
	var outside []int64
	for id, n := range seen {
		if n > 1 && !claimed[id] {
			outside = append(outside, id)
		}
	}
	require.Empty(t, outside, "rows delivered twice that the killed process did not hold")

	// D25: every row sent twice has an attempt recorded abandoned.
	var abandoned, unmatched int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchboard.delivery_records WHERE class = 'abandoned'`).Scan(&abandoned))
	for id, n := range seen {
		if n < 2 {
			continue
		}
		var has bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM switchboard.delivery_records WHERE outbox_id = $1 AND class = 'abandoned')`, id).Scan(&has))
		if !has {
			unmatched++
		}
	}
	var sentTwiceRecords int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT outbox_id FROM switchboard.delivery_records
		WHERE outbox_id = ANY($1) GROUP BY outbox_id HAVING count(*) > 1) x`, keys(claimed)).Scan(&sentTwiceRecords))
	pending.Expect(t, "crash/abandoned-records", unmatched == 0 && (dups == 0 || abandoned > 0),
		"%d of %d duplicated rows have no abandoned record; %d abandoned records, %d claimed rows attempted twice", unmatched, dups, abandoned, sentTwiceRecords)

	// The survivors stop gracefully.
	stopAt := time.Now()
	defer func() { t.Logf("stopped in %v", time.Since(stopAt)) }()
	var survivors []*process
	for _, p := range procs {
		if p != victim {
			survivors = append(survivors, p)
		}
	}
	for _, p := range survivors {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for i, p := range survivors {
		select {
		case err := <-p.exited:
			require.NoError(t, err, "serve %d did not stop cleanly:\n%s", i+1, p.logs)
		case <-time.After(30 * time.Second):
			t.Fatalf("serve %d still running 30 s after SIGTERM", i+1)
		}
	}

	// Secrets: every log line of every process and every stored column.
	dump, err := faults.DumpTables(ctx, pool)
	require.NoError(t, err)
	var logs []string
	for _, p := range procs {
		logs = append(logs, p.logs.String())
	}
	row.SecretsFound = faults.CountCanary(append(logs, dump)...)
	require.Zero(t, row.SecretsFound, "the planted Gotify token appeared in logs or tables")

	row.Figures = append(row.Figures,
		fmt.Sprintf("killed process held %d claims; claims recovered %.1f s after the kill", len(claimed), recovered.Seconds()),
		fmt.Sprintf("drained %d rows in %.1f s (%.0f rows/s) with one process killed", rows, drained.Seconds(), float64(rows)/drained.Seconds()),
		fmt.Sprintf("%d abandoned records; %d rows the killed process held were attempted twice", abandoned, sentTwiceRecords))
}

func keys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
