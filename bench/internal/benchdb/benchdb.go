// Package benchdb holds what the bench drivers share: a fresh database per
// run, dropped at the end, and the median they report.
package benchdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultAdminURL is the server the drivers use when DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Create creates sbbench_<random> on admin's server and returns its URL and
// a function that drops it.
func Create(ctx context.Context, admin string) (string, func() error, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "sbbench_" + hex.EncodeToString(b)

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("error connecting to %s: %w", u.Redacted(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", nil, fmt.Errorf("error creating database %s: %w", name, err)
	}
	drop := func() error {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return fmt.Errorf("error connecting to drop %s: %w", name, err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("error dropping database %s: %w", name, err)
		}
		return nil
	}
	db := *u
	db.Path = "/" + name
	return db.String(), drop, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Machine is what the whole machine has done since boot, from /proc/stat:
// the CPU time it spent busy (user, nice, system, irq, softirq: every
// process, the database's included), the part of it in the kernel
// (system, irq, softirq: system calls, context switches, interrupts), and
// how many times its CPUs switched from one task to another. The
// difference over a measurement, divided by the work done, is the CPU the
// work cost: a figure that another tenant slowing the machine down
// changes far less than it changes a rate; and how much of it went to the
// kernel, and how often the work handed the CPU between threads and
// processes.
type Machine struct {
	Busy, Kernel time.Duration
	Switches     int64
}

// Sub returns m less an earlier reading.
func (m Machine) Sub(before Machine) Machine {
	return Machine{Busy: m.Busy - before.Busy, Kernel: m.Kernel - before.Kernel, Switches: m.Switches - before.Switches}
}

// ReadMachine reads Machine from /proc/stat; ok is false where there is
// none.
func ReadMachine() (m Machine, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, false
	}
	lines := strings.Split(string(b), "\n")
	f := strings.Fields(lines[0])
	if len(f) < 8 || f[0] != "cpu" {
		return Machine{}, false
	}
	ticks := func(fields ...int) (time.Duration, bool) {
		var t int64
		for _, i := range fields {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return 0, false
			}
			t += n
		}
		return time.Duration(t) * (time.Second / 100), true // USER_HZ
	}
	if m.Busy, ok = ticks(1, 2, 3, 6, 7); !ok { // user nice system irq softirq
		return Machine{}, false
	}
	if m.Kernel, ok = ticks(3, 6, 7); !ok {
		return Machine{}, false
	}
	for _, l := range lines[1:] {
		if n, found := strings.CutPrefix(l, "ctxt "); found {
			if m.Switches, err = strconv.ParseInt(strings.TrimSpace(n), 10, 64); err != nil {
				return Machine{}, false
			}
			break
		}
	}
	return m, true
}
