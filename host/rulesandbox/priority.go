package rulesandbox

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// A program that has used demoteCPU of CPU time is not an ordinary rule
// (a rule reads a few fields: microseconds), and its worker drops to
// demotedNice for the rest of its life, so that whatever it still burns
// until its limits stop it, every other process (the server, another
// owner's worker, PostgreSQL) takes the CPU first. An unprivileged
// process cannot raise a priority again: a demoted worker is not reused.
const (
	demoteCPU   = 20 * time.Millisecond
	demotedNice = 19
	// demotePoll is how often a busy worker's CPU time is read.
	demotePoll = 5 * time.Millisecond
)

// watchCPU demotes w once the program it runs (current's value, set by the
// reader as replies come) has used demoteCPU; it returns a function that
// stops watching.
func (p *Pool) watchCPU(w *worker, current *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(demotePoll)
		defer tick.Stop()
		pid := w.cmd.Process.Pid
		prog, base := int64(-1), time.Duration(0)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			used, ok := cpuTime(pid)
			if !ok {
				return
			}
			if i := current.Load(); i != prog {
				prog, base = i, used
				continue
			}
			if used-base >= demoteCPU {
				if demote(pid) {
					w.demoted.Store(true)
					p.demoted.Add(1)
				}
				return
			}
		}
	}()
	return func() { close(done) }
}

// demote lowers every thread of process pid to demotedNice (on Linux a
// priority is a thread's: each is set); threads it starts later inherit
// it. Two passes catch a thread started during the first.
func demote(pid int) bool {
	done := false
	for range 2 {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return done
		}
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				if syscall.Setpriority(syscall.PRIO_PROCESS, tid, demotedNice) == nil {
					done = true
				}
			}
		}
	}
	return done
}
