package rig

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CPUMeter measures the CPU a measurement costs on its own side of a shared
// machine: this process's (every goroutine: the contender's and the
// loopback stand-in's; getrusage) and that of the PostgreSQL backends
// serving the rig's database (each backend's time on a CPU from
// /proc/<pid>/schedstat, in ns). Backends that connect during the
// measurement count from zero; one that exits counts up to its last
// sample, so Sample is called before a contender closes its pool, and a
// sampler reads every 50 ms meanwhile. What it leaves out is shared by
// every contender alike: PostgreSQL's background processes (WAL writer,
// checkpointer) and the kernel's work for other processes.
type CPUMeter struct {
	r     *Rig
	proc0 time.Duration
	mu    sync.Mutex
	first map[int]time.Duration
	last  map[int]time.Duration
	name  map[int]string // application_name: whose backend (NewPool's name)
	stop  chan struct{}
	done  chan struct{}
}

// StartCPU starts a meter: the backends of the rig's database connected
// now count from what they have used so far.
func (r *Rig) StartCPU(ctx context.Context) *CPUMeter {
	m := &CPUMeter{r: r, proc0: ProcessCPU(), first: map[int]time.Duration{}, last: map[int]time.Duration{}, name: map[int]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	m.sample(ctx, true)
	go func() {
		defer close(m.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample(ctx, false)
			}
		}
	}()
	return m
}

// Sample reads the backends now (call it before closing a pool).
func (m *CPUMeter) Sample(ctx context.Context) { m.sample(ctx, false) }

// Stop samples a last time and returns the process's CPU and the
// backends' since StartCPU.
func (m *CPUMeter) Stop(ctx context.Context) (proc, db time.Duration) {
	proc = ProcessCPU() - m.proc0
	close(m.stop)
	<-m.done
	m.sample(ctx, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, t := range m.last {
		db += t - m.first[pid]
	}
	return proc, db
}

// DBByName is, after Stop, the backends' CPU by their application_name
// (NewPool's name; "" for the rig's own pool and unnamed ones).
func (m *CPUMeter) DBByName() map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := map[string]time.Duration{}
	for pid, t := range m.last {
		by[m.name[pid]] += t - m.first[pid]
	}
	return by
}

func (m *CPUMeter) sample(ctx context.Context, initial bool) {
	rows, err := m.r.Pool.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return
	}
	var (
		pids  []int
		names []string
	)
	for rows.Next() {
		var (
			pid  int
			name string
		)
		if rows.Scan(&pid, &name) == nil {
			pids, names = append(pids, pid), append(names, name)
		}
	}
	rows.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, pid := range pids {
		m.name[pid] = names[i]
		t, ok := schedTime(pid)
		if !ok {
			continue
		}
		if _, seen := m.first[pid]; !seen {
			if initial {
				m.first[pid] = t
			} else {
				m.first[pid] = 0
			}
		}
		m.last[pid] = t
	}
}

// schedTime is the time process pid has spent on a CPU (the first field of
// /proc/<pid>/schedstat, ns).
func schedTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}

// ProcessCPU is this process's user and system CPU so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
