package pgcluster

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinEnv names the directory of the PostgreSQL server binaries.
const BinEnv = "SWITCHBOARD_FAULTS_PGBIN"

// BinDefault is Debian's PostgreSQL 15.
const BinDefault = "/usr/lib/postgresql/15/bin"

// Cluster is a running private cluster.
type Cluster struct {
	Dir  string
	Port int
	bin  string
	run  []string // runuser prefix when root
	tb   testing.TB
}

// Start initialises and starts a cluster, stopped and removed at cleanup.
// It fails the test when the binaries are missing: it never skips.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	bin := cmp.Or(os.Getenv(BinEnv), BinDefault)
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		tb.Fatalf("no PostgreSQL server binaries in %s (set %s): %v", bin, BinEnv, err)
	}
	dir, err := os.MkdirTemp("", "faults-pg-")
	if err != nil {
		tb.Fatalf("error making the cluster directory: %v", err)
	}
	c := &Cluster{Dir: dir, bin: bin, tb: tb}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root, and there is no postgres user to run the cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatalf("error handing the cluster directory to postgres: %v", err)
		}
		c.run = []string{"runuser", "-u", "postgres", "--"}
	}
	if c.Port, err = freePort(); err != nil {
		tb.Fatalf("error finding a free port: %v", err)
	}
	c.cmd("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	c.pgctl("start")
	tb.Cleanup(func() { c.pgctlQuiet("stop", "-m", "immediate") })
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) cmd(name string, args ...string) {
	c.tb.Helper()
	argv := append(append(append([]string{}, c.run...), filepath.Join(c.bin, name)), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		c.tb.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func (c *Cluster) pgctlArgs(action string, extra ...string) []string {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", c.Port, c.Dir)
	return append([]string{"-D", c.data(), "-o", opts, "-l", filepath.Join(c.Dir, "log"), "-w", "-t", "60", action}, extra...)
}

func (c *Cluster) pgctl(action string, extra ...string) {
	c.tb.Helper()
	c.cmd("pg_ctl", c.pgctlArgs(action, extra...)...)
}

func (c *Cluster) pgctlQuiet(action string, extra ...string) {
	argv := append(append(append([]string{}, c.run...), filepath.Join(c.bin, "pg_ctl")), c.pgctlArgs(action, extra...)...)
	_ = exec.Command(argv[0], argv[1:]...).Run()
}

// Restart restarts the server (fast shutdown: every connection is cut)
// and waits until it accepts connections again.
func (c *Cluster) Restart() { c.tb.Helper(); c.pgctl("restart", "-m", "fast") }

// Stop stops the server (fast shutdown: every connection is cut) and
// waits until it is down; StartAgain brings it back.
func (c *Cluster) Stop() { c.tb.Helper(); c.pgctl("stop", "-m", "fast") }

// StartAgain starts a stopped server and waits until it accepts
// connections.
func (c *Cluster) StartAgain() { c.tb.Helper(); c.pgctl("start") }

// Pause freezes the server as a stalled host or a failover in progress
// would: SIGSTOP to the postmaster, then to every process it started (its
// backends and auxiliary processes). Connections stay open and answer
// nothing; new ones are not accepted. Resume (or the test's end) thaws
// it. It returns how many processes it stopped.
func (c *Cluster) Pause() int {
	c.tb.Helper()
	pids := c.processes()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	c.tb.Cleanup(c.Resume) // never leave a frozen server behind
	return len(pids)
}

// Resume thaws a paused server: its processes first, its postmaster last.
func (c *Cluster) Resume() {
	pids := c.processes()
	for i := len(pids) - 1; i >= 0; i-- {
		_ = syscall.Kill(pids[i], syscall.SIGCONT)
	}
}

// processes lists the postmaster's pid, then its children's.
func (c *Cluster) processes() []int {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		c.tb.Fatalf("error reading the postmaster's pid: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		c.tb.Fatalf("error reading the postmaster's pid: %v", err)
	}
	pids := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ")".
		_, rest, ok := strings.Cut(string(stat), ") ")
		if !ok {
			continue
		}
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pm) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// URL is the connection string of database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// CreateDatabase creates database db.
func (c *Cluster) CreateDatabase(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("error connecting to the private cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("error creating database %s: %w", db, err)
	}
	return nil
}

// TerminateBackends kills every other connection to database db
// (pg_terminate_backend) and returns how many it killed.
func (c *Cluster) TerminateBackends(ctx context.Context, db string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0, fmt.Errorf("error connecting to the private cluster: %w", err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("error terminating backends: %w", err)
	}
	return n, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
