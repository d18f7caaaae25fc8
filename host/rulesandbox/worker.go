package rulesandbox

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/itchyny/gojq"
)

// How a process is told to be a worker: both the first argument and the
// environment variable, so that neither a stray argument nor a stray
// variable turns a server into one.
const (
	workerArg    = "-switchboard-rule-worker"
	workerEnv    = "SWITCHBOARD_RULE_WORKER"
	workerMemEnv = "SWITCHBOARD_RULE_WORKER_MEMORY"
	// workerSpaceEnv, when set (tests), is the address space a worker may
	// gain before it asks to be retired, instead of its memory.
	workerSpaceEnv = "SWITCHBOARD_RULE_WORKER_SPACE"
)

// Exit codes of a worker that stopped itself.
const (
	exitCPU      = 3 // SIGXCPU: past the request's CPU time
	exitProtocol = 4 // a malformed request
)

func init() { MaybeRunWorker() }

// MaybeRunWorker makes this process a rule worker, and never returns, when
// it was started as one (by a Pool); otherwise it returns at once. This
// package's init calls it, so every binary that links the package serves as
// a worker; main (and a TestMain) may call it first thing to say so.
func MaybeRunWorker() {
	if len(os.Args) < 2 || os.Args[1] != workerArg || os.Getenv(workerEnv) != "1" {
		return
	}
	// The protocol gets its own descriptor; fd 1 then points at stderr,
	// so that nothing a program or a library prints can corrupt a frame.
	fd, err := syscall.Dup(1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rule worker: "+err.Error())
		os.Exit(1)
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		fmt.Fprintln(os.Stderr, "rule worker: "+err.Error())
		os.Exit(1)
	}
	syscall.CloseOnExec(fd)
	os.Exit(runWorker(os.Stdin, os.NewFile(uintptr(fd), "rule-protocol")))
}

// setLimits applies the worker's own limits, before it reads anything.
func setLimits(memory, grow int64) error {
	runtime.GOMAXPROCS(1)
	if memory > 0 {
		// memory is what programs may add to what the idle worker
		// already maps (its threads' stacks, the runtime's first heap
		// arena: some 100 MiB of address space, a tenth of it resident).
		// The runtime collects hard before the kernel refuses memory;
		// past RLIMIT_DATA an allocation fails and the runtime dies with
		// "out of memory".
		if raceBuild {
			// ThreadSanitizer maps shadow memory, several times the
			// heap, inside the same limit: a race-built worker (a test
			// binary of another package, under -race) gets room for it.
			memory *= 16
		}
		base, err := vmStatus("VmData")
		if err != nil {
			return err
		}
		debug.SetMemoryLimit(memory * 3 / 4)
		limit := uint64(base + memory)
		if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			return fmt.Errorf("RLIMIT_DATA: %w", err)
		}
		// RLIMIT_DATA alone does not hold: the kernel charges it when a
		// mapping is made writable by mmap, but the runtime makes heap
		// memory usable inside address space it reserved before (and a
		// writable mapping over a reservation is not counted as growth),
		// so one allocation of 1.6 GB (setpath([1e8]; 1)) sometimes went
		// through. The address space is charged when it is reserved,
		// whatever happens to it later: RLIMIT_AS bounds every mapping.
		// The idle worker's own reservations (the page allocator's
		// summaries, the first arenas) are its base; programs may add
		// four times their memory of address space (the heap grows in
		// 64 MiB arenas, and the collector's headroom), which no
		// allocation past the memory limit fits in. A race-built worker
		// maps ThreadSanitizer's terabytes of shadow: it keeps
		// RLIMIT_DATA alone.
		if !raceBuild {
			space, err := vmStatus("VmSize")
			if err != nil {
				return err
			}
			space += runtimeSpace
			as := uint64(space + 4*memory)
			// The runtime never gives reserved address space back, so
			// a worker that once held a large heap keeps less room for
			// every later program; past one memory's worth of growth it
			// asks to be retired (tidy), and no program starts with less
			// than three times its memory of address space left.
			if grow <= 0 {
				grow = memory
			}
			spaceRetire = space + min(grow, memory)
			threadsBase, _ = statusField("Threads")
			threadStack = threadReserve()
			if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
				return fmt.Errorf("RLIMIT_AS: %w", err)
			}
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{}); err != nil {
		return fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	// The hard CPU limit is the worker's whole life; each request lowers
	// the soft one to what it may use (setCPU). Past the hard one the
	// kernel sends SIGKILL.
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: workerCPULife, Max: workerCPULife}); err != nil {
		return fmt.Errorf("RLIMIT_CPU: %w", err)
	}
	return nil
}

// runtimeSpace is the address space the runtime adds as the worker starts
// serving (its first heap arenas and threads), counted in the worker's base
// and not in what its programs may add. It was 128 MiB while every thread
// also reserved a malloc arena of 64 MiB (72 MiB seen after a trivial
// request); with one arena (MALLOC_ARENA_MAX=1, pool.spawn) a thread adds
// its 8 MiB stack, and tidy allows for threads started since.
const runtimeSpace = 64 << 20

// spaceRetire is the address space (VmSize) past which a worker asks to be
// retired after a request; 0 when no RLIMIT_AS applies.
var spaceRetire int64

// threadsBase is the worker's threads when spaceRetire was set. A thread
// the runtime starts later (on a loaded machine, one for each syscall that
// blocked long enough for the scheduler to hand its P over) reserves its
// stack, RLIMIT_STACK's worth with cgo: address space no program added,
// which tidy does not count against it (ci1 of session 6 saw a worker
// retired after trivial requests under load 8-11).
var threadsBase int64

// threadStack is threadReserve, read once with threadsBase.
var threadStack int64

// threadReserve is the address space one thread reserves for its stack:
// RLIMIT_STACK (pthread's default), or 8 MiB when that is unlimited.
func threadReserve() int64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<30 {
		return int64(lim.Cur)
	}
	return 8 << 20
}

// vmStatus is a size of /proc/self/status, in bytes: VmData (the data
// segment, what RLIMIT_DATA counts) or VmSize (the address space, what
// RLIMIT_AS counts).
func vmStatus(field string) (int64, error) {
	kb, err := statusField(field)
	return kb << 10, err
}

// statusField is a number of /proc/self/status (a size in kB, or a count).
func statusField(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading %s: %w", field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// workerCPULife is the CPU seconds a worker may use in all its life; the
// parent retires it well before (maxRequests, cpuRetire).
const workerCPULife = 600

// cpuUsed is the CPU time this process has used, in whole seconds rounded
// up.
func cpuUsed() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	us := (ru.Utime.Sec+ru.Stime.Sec)*1e6 + int64(ru.Utime.Usec+ru.Stime.Usec)
	return (us + 999_999) / 1e6
}

// setCPU lets the next request use n more seconds of CPU: past them the
// kernel sends SIGXCPU and the worker exits with exitCPU.
func setCPU(n int64) {
	soft := min(cpuUsed()+max(n, 1), workerCPULife)
	_ = syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: uint64(soft), Max: workerCPULife})
}

func runWorker(in *os.File, out *os.File) int {
	memory, _ := strconv.ParseInt(os.Getenv(workerMemEnv), 10, 64)
	grow, _ := strconv.ParseInt(os.Getenv(workerSpaceEnv), 10, 64)
	if err := setLimits(memory, grow); err != nil {
		fmt.Fprintln(os.Stderr, "rule worker: "+err.Error())
		return 1
	}
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		fmt.Fprintln(os.Stderr, "rule worker: exceeded its CPU time limit")
		os.Exit(exitCPU)
	}()
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	cache := newCodeCache(codeCacheBytes)
	for {
		var req request
		if err := readFrame(r, &req); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "rule worker: reading a request: "+err.Error())
			return exitProtocol
		}
		input, err := readRaw(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rule worker: reading an input: "+err.Error())
			return exitProtocol
		}
		req.Input = input
		setCPU(req.CPUSeconds)
		serve(req, cache, func(rep reply) {
			// A reply is flushed at once: the parent's deadline runs per
			// program. A parent gone away ends the worker at its next read.
			if writeFrame(w, rep) == nil {
				_ = w.Flush()
			}
		})
		if err := w.Flush(); err != nil {
			return 0
		}
	}
}

// serve answers one request, one reply per program then Done.
func serve(req request, cache *codeCache, send func(reply)) {
	var input any
	if req.Op == "eval" {
		dec := json.NewDecoder(bytes.NewReader(req.Input))
		dec.UseNumber()
		if err := dec.Decode(&input); err != nil {
			for i := range req.Exprs {
				send(reply{Index: i, Err: "the input is not JSON"})
			}
			send(reply{Done: true})
			return
		}
	}
	send(reply{Ready: true})
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Second
	}
	for i, expr := range req.Exprs {
		rep := reply{Index: i}
		code, err := cache.get(expr, req.Unchecked)
		var na *notAllowedError
		switch {
		case errors.As(err, &na):
			rep.NotAllowed = cut(na.what)
		case err != nil:
			rep.CompileErr = cut(err.Error())
		case req.Op == "eval":
			v, ok, err := runExpr(context.Background(), code, input, timeout)
			switch {
			case err != nil:
				rep.Err = cut(err.Error())
			case ok:
				rep.Output, rep.Truthy, rep.Text = true, v != nil && v != false, asText(v)
			}
		}
		send(rep)
	}
	send(reply{Done: true, Retire: tidy(cache)})
}

// errMax bounds an error message in a reply: `error(.s)` on a 250 KB
// string is a 250 KB message.
const errMax = 1024

func cut(s string) string {
	if len(s) > errMax {
		return strings.ToValidUTF8(s[:errMax], "") + "…"
	}
	return s
}

// asText is v as text when it is a scalar, cut to textMax bytes.
func asText(v any) *string {
	var s string
	switch o := v.(type) {
	case string:
		s = o
	case json.Number:
		s = o.String()
	case int, float64, bool:
		s = fmt.Sprint(o)
	case *big.Int:
		s = o.String()
	default:
		return nil
	}
	if len(s) > textMax {
		s = s[:textMax]
	}
	return &s
}

// retireHeap is the heap a worker may keep between requests: past it, it
// frees what it can, and past it still asks to be retired.
const retireHeap = 32 << 20

// tidy returns memory a request left behind, compiled programs first (a
// program's size is only estimated by the cache; its regexes' real size
// shows here); true when the worker should be retired because its heap is
// still large or its address space grew past spaceRetire.
func tidy(cache *codeCache) bool {
	if spaceRetire > 0 {
		limit := spaceRetire
		if threads, err := statusField("Threads"); err == nil && threads > threadsBase {
			limit += (threads - threadsBase) * threadStack
		}
		if space, err := vmStatus("VmSize"); err != nil || space >= limit {
			return true
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapAlloc < retireHeap {
		return false
	}
	cache.clear()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc >= retireHeap
}

// codeCacheBytes bounds the worker's compiled programs, weighed by source
// size times codeWeight (a compiled program, its regexes and their caches
// are some tens of times its source).
const (
	codeCacheBytes = 16 << 20
	codeWeight     = 64
)

// codeCache is a worker's compiled programs, least recently used first out,
// bounded in (estimated) bytes; it lives and dies with the worker.
type codeCache struct {
	limit, size int64
	order       *list.List // of *codeEntry, most recent first
	m           map[codeKey]*list.Element
}

type codeKey struct {
	expr      string
	unchecked bool
}

type codeEntry struct {
	key  codeKey
	code *gojq.Code
	err  error
	size int64
}

func newCodeCache(limit int64) *codeCache {
	return &codeCache{limit: limit, order: list.New(), m: map[codeKey]*list.Element{}}
}

func (c *codeCache) clear() {
	c.order.Init()
	clear(c.m)
	c.size = 0
}

func (c *codeCache) get(expr string, unchecked bool) (*gojq.Code, error) {
	k := codeKey{expr, unchecked}
	if e, ok := c.m[k]; ok {
		c.order.MoveToFront(e)
		ent := e.Value.(*codeEntry)
		return ent.code, ent.err
	}
	var code *gojq.Code
	var err error
	if unchecked {
		code, err = compileUnchecked(expr)
	} else {
		code, err = compileExpr(expr)
	}
	ent := &codeEntry{key: k, code: code, err: err, size: int64(len(expr)+64) * codeWeight}
	c.m[k] = c.order.PushFront(ent)
	c.size += ent.size
	for c.size > c.limit && c.order.Len() > 1 {
		last := c.order.Back()
		old := last.Value.(*codeEntry)
		c.order.Remove(last)
		delete(c.m, old.key)
		c.size -= old.size
	}
	return code, err
}
