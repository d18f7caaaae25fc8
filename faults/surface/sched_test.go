package surface_test

import (
	"fmt"
	"os"
	"time"
)

// cpuWait is what this process's threads have run and waited, runnable,
// for a CPU, from /proc/self/task/*/schedstat: on a shared machine it says
// how much of a row's latency is the machine's load, not the design.
func cpuWait() (ran, waited time.Duration) {
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		var r, w int64
		if _, err := fmt.Sscan(string(b), &r, &w); err == nil {
			ran += time.Duration(r)
			waited += time.Duration(w)
		}
	}
	return ran, waited
}

// cpuWaitFigure describes the process's CPU wait since ran0, waited0
// (cpuWait), over wall.
func cpuWaitFigure(ran0, waited0 time.Duration, wall time.Duration) string {
	ran, waited := cpuWait()
	ran, waited = ran-ran0, waited-waited0
	share := 0.0
	if ran+waited > 0 {
		share = 100 * float64(waited) / float64(ran+waited)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("over %s the test process (server and load) ran %s of CPU and waited %s for one, %.0f%% of its runnable time (load average %s)",
		wall.Round(time.Millisecond), ran.Round(time.Millisecond), waited.Round(time.Millisecond), share, firstField(string(load)))
}

func firstField(s string) string {
	for i, r := range s {
		if r == ' ' {
			return s[:i]
		}
	}
	return s
}
