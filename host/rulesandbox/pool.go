package rulesandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of Config.
const (
	// WorkersDefault is how many workers the pool runs at most at once.
	WorkersDefault = 16
	// PerOwnerDefault is how many of them one owner may hold at once.
	PerOwnerDefault = 2
	// IdleDefault is how many idle workers the pool keeps warm.
	IdleDefault = 4
	// MemoryDefault is the memory a worker's programs may add to the
	// idle worker's (RLIMIT_DATA, set to the idle worker's data segment
	// plus this): 128 MiB. A delivery is at most 256 KiB; decoded, a rule
	// reading it needs a few.
	MemoryDefault = 128 << 20
	// GraceDefault is how long past a program's own timeout its worker
	// may still run before it is killed.
	GraceDefault = 250 * time.Millisecond
	// CompileTimeoutDefault bounds compiling one program.
	CompileTimeoutDefault = time.Second
	// MaxRequestsDefault is how many requests a worker serves before it
	// is replaced.
	MaxRequestsDefault = 1000
	// ReserveDefault is how many ready workers the pool keeps for owners
	// that hold none.
	ReserveDefault = 2
)

// Config configures a Pool; zero fields take their defaults.
type Config struct {
	Workers, PerOwner, Idle int
	// Memory is what a worker's programs may add to its data segment
	// (RLIMIT_DATA), in bytes.
	Memory int64
	Grace  time.Duration
	// CompileTimeout bounds compiling one program at save time.
	CompileTimeout time.Duration
	// CPU is the CPU time one request may use (RLIMIT_CPU, whole
	// seconds); defaults to its programs' wall time, rounded up, plus one
	// second. A backstop: the wall deadline comes first.
	CPU         time.Duration
	MaxRequests int
	// Exe is the worker binary; defaults to this process's own.
	Exe string
	// Unchecked turns the checked subset off: programs are compiled as
	// plain gojq. Tests only, to show the limits hold without it.
	Unchecked bool
	// Reserve is how many ready idle workers the pool keeps, started
	// ahead of need, for owners that hold none (acquire); negative: none.
	// Defaults to ReserveDefault, at most Workers less PerOwner.
	Reserve int
}

// Pool runs programs in worker processes (package doc).
type Pool struct {
	cfg Config

	mu      sync.Mutex
	idle    []*worker
	total   int
	owners  map[string]int
	changed chan struct{}
	closed  bool
	warming int
	// warmingAny counts the warming workers started for any owner (the
	// reserve's), not for a busy owner's request: only they fill the
	// reserve.
	warmingAny int
	// queue is each owner's waiting requests, in the order they came.
	queue map[string][]*int
	// short counts the requests waiting on the reserve (acquire).
	short int

	// spaceGrow, when set (tests), is the address space a worker may gain
	// before it is retired (workerSpaceEnv).
	spaceGrow int64

	// onReady, when set (tests), is called with a worker's pid once it
	// has its request's input.
	onReady func(pid int)
	// onDemote, when set (tests), is called with a worker's pid once it
	// is demoted (watch); demoteAt, when set, replaces demoteAfter.
	onDemote func(pid int)
	demoteAt time.Duration
	// onReap, when set (tests), is called with a worker's pid before a
	// worker killed past a deadline is reaped in the background.
	onReap func(pid int)

	spawned, killed atomic.Int64
}

// New returns a pool; it starts workers only when asked to run something.
func New(cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = WorkersDefault
	}
	if cfg.PerOwner <= 0 {
		cfg.PerOwner = PerOwnerDefault
	}
	cfg.PerOwner = min(cfg.PerOwner, cfg.Workers)
	if cfg.Idle <= 0 {
		cfg.Idle = IdleDefault
	}
	if cfg.Memory <= 0 {
		cfg.Memory = MemoryDefault
	}
	if cfg.Grace <= 0 {
		cfg.Grace = GraceDefault
	}
	if cfg.CompileTimeout <= 0 {
		cfg.CompileTimeout = CompileTimeoutDefault
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = MaxRequestsDefault
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = ReserveDefault
	}
	// The reserve is for other owners: a pool with no room past one
	// owner's share keeps none.
	cfg.Reserve = max(min(cfg.Reserve, cfg.Workers-cfg.PerOwner), 0)
	return &Pool{cfg: cfg, owners: map[string]int{}, queue: map[string][]*int{}, changed: make(chan struct{})}
}

var (
	defaultOnce sync.Once
	defaultPool *Pool
)

// Default is the process's shared pool, with the default Config.
func Default() *Pool {
	defaultOnce.Do(func() { defaultPool = New(Config{}) })
	return defaultPool
}

// Limits are what the pool lets one program cost, for the docs and logs.
func (p *Pool) Limits() Config { return p.cfg }

// Stats counts the pool's workers.
type Stats struct {
	// Spawned and Killed count workers started and killed (past a limit,
	// retired, or surplus) since the pool began; Live is how many run now,
	// Idle how many of them wait.
	Spawned, Killed int64
	Live, Idle      int
}

// Stats reads the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Spawned: p.spawned.Load(), Killed: p.killed.Load(), Live: p.total, Idle: len(p.idle)}
}

// Close kills the idle workers; busy ones are killed when they finish.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.total -= len(idle)
	p.mu.Unlock()
	for _, w := range idle {
		p.stop(w)
	}
}

// Kind says what became of one program.
type Kind int

const (
	// Ran: the program ran; Output says whether it produced an output.
	Ran Kind = iota
	// NotAllowed: it uses a construct outside the checked subset
	// (Detail names it).
	NotAllowed
	// NoCompile: it does not compile (Detail says why).
	NoCompile
	// Failed: it raised an error (Detail).
	Failed
	// Stopped: its worker was stopped by a limit (Detail says which).
	Stopped
	// NotRun: the caller's budget ran out (or it went away) first.
	NotRun
)

// Result is what became of one program.
type Result struct {
	Kind   Kind
	Detail string
	// Output is true when the program produced an output; Truthy when it
	// is neither false nor null; Text is it when a scalar (HasText).
	Output, Truthy, HasText bool
	Text                    string
}

// Compile checks that each program compiles (in a worker: compiling a
// regular expression can cost as much as running one), for owner. Its
// Results are Ran, NotAllowed, NoCompile, Stopped or NotRun.
func (p *Pool) Compile(ctx context.Context, owner string, exprs []string) []Result {
	return p.run(ctx, owner, request{Op: "compile", Exprs: exprs, Unchecked: p.cfg.Unchecked}, p.cfg.CompileTimeout)
}

// Eval runs each program on input (one JSON value), in order, each for at
// most timeout and all of them until ctx ends, for owner. A program that
// passes a limit is Stopped and the ones after it run in a fresh worker.
func (p *Pool) Eval(ctx context.Context, owner string, exprs []string, input []byte, timeout time.Duration) []Result {
	return p.run(ctx, owner, request{Op: "eval", Exprs: exprs, Input: input, TimeoutMS: max(timeout.Milliseconds(), 1), Unchecked: p.cfg.Unchecked}, timeout)
}

func (p *Pool) run(ctx context.Context, owner string, req request, timeout time.Duration) []Result {
	results := make([]Result, len(req.Exprs))
	all := req.Exprs
	for next := 0; next < len(all); {
		notRun := func(why string) {
			for i := next; i < len(all); i++ {
				results[i] = Result{Kind: NotRun, Detail: why}
			}
			next = len(all)
		}
		if ctx.Err() != nil {
			notRun(budgetGone)
			break
		}
		w, err := p.acquire(ctx, owner)
		if err != nil {
			if ctx.Err() != nil {
				notRun(budgetGone)
			} else {
				notRun("no rule worker: " + err.Error())
			}
			break
		}
		req.Exprs = all[next:]
		per := timeout + p.cfg.Grace
		req.CPUSeconds = int64(per.Seconds()*float64(len(req.Exprs))) + 1
		if p.cfg.CPU > 0 {
			req.CPUSeconds = max(int64(p.cfg.CPU.Seconds()), 1)
		}
		n, healthy := p.roundTrip(ctx, w, req, per, results[next:])
		p.release(owner, w, healthy)
		next += n
	}
	return results
}

// readyAllowance bounds how long a worker may take to start and decode a
// request's input (at most a 256 KiB delivery) before its first program's
// own deadline starts.
const readyAllowance = 5 * time.Second

const budgetGone = "not run: the rules' time budget ran out"

// wallCap is how many times its programs' time a request may take in wall
// time while its worker has not used that much CPU (a loaded machine),
// unless the program was demoted (then once):
// past it the worker is killed, so that a worker that never gets a core,
// or is stopped, cannot hold its caller without end when the caller set
// no deadline.
const wallCap = 8

// acquire takes a worker for owner: an idle one, else a new one; it waits
// only while owner holds PerOwner workers, or the pool holds Workers.
//
// An owner's requests are served in the order they came (a dry run's
// compile is not overtaken by the evaluations of the owner's later dry
// runs, which would hold it for their whole budget). The last reserve idle
// workers are kept for owners that hold none and have nothing else waiting:
// a busy owner (the one whose hostile rules kill worker after worker, taking
// each fresh one) takes from them only a worker it used last, so another
// owner's delivery finds a ready worker instead of waiting 100-250 ms for
// one to start on a busy machine (faults row 6d). Such an owner has a
// worker started for it in the background and takes that, or one of its
// own that comes back first.
func (p *Pool) acquire(ctx context.Context, owner string) (*worker, error) {
	p.mu.Lock()
	turn := new(int)
	p.queue[owner] = append(p.queue[owner], turn)
	short := false // counted in p.short: waiting on the reserve
	// leave takes this request out of owner's queue (p.mu held), as soon
	// as it has a worker or gives up: the next of owner's requests may go.
	leave := func() {
		if short {
			short = false
			p.short--
		}
		q := p.queue[owner]
		if i := slices.Index(q, turn); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(p.queue, owner)
		} else {
			p.queue[owner] = q
		}
		p.broadcast()
	}
	for {
		if p.closed {
			leave()
			p.mu.Unlock()
			return nil, errors.New("the pool is closed")
		}
		held := p.owners[owner]
		// An owner is busy while it holds a worker or has more requests
		// waiting behind this one: the one whose hostile rules kill its
		// workers as fast as it gets them holds none for a moment between
		// two of its queued requests, and took the reserve each time,
		// leaving another owner's delivery to start a worker of its own
		// (60-160 ms in faults row 6d).
		busy := held > 0 || len(p.queue[owner]) > 1
		if p.queue[owner][0] == turn && held < p.cfg.PerOwner {
			n, pick := len(p.idle), -1
			// A worker owner used last first (its caches are warm, and
			// within the reserve it is the only kind owner may take),
			// then one nobody has used, then any.
			for i := n - 1; i >= 0 && pick < 0; i-- {
				if p.idle[i].owner == owner {
					pick = i
				}
			}
			if pick < 0 && n > 0 && (!busy || n > p.cfg.Reserve) {
				pick = n - 1
				for i := n - 1; i >= 0; i-- {
					if p.idle[i].owner == "" {
						pick = i
						break
					}
				}
			}
			if pick >= 0 {
				w := p.idle[pick]
				p.idle = slices.Delete(p.idle, pick, pick+1)
				w.owner = owner
				p.owners[owner]++
				p.topUp()
				leave()
				p.mu.Unlock()
				return w, nil
			}
			// With none idle, one already starting for any owner is
			// nearer ready than one started now.
			if !busy && n == 0 && p.warmingAny == 0 && p.total < p.cfg.Workers {
				p.total++
				p.owners[owner]++
				p.topUp()
				leave()
				p.mu.Unlock()
				w, err := p.spawn()
				if err != nil {
					p.release(owner, nil, false)
					return nil, err
				}
				w.owner = owner
				return w, nil
			}
			if busy {
				// A worker is started for this request in the
				// background, unless one already is; it takes that or
				// one of its own that comes back first.
				if !short {
					short = true
					p.short++
				}
				if p.warming < p.short && p.total < p.cfg.Workers {
					p.total++
					p.warming++
					go p.warm(owner)
				}
			}
		} else if short {
			short = false
			p.short--
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			p.mu.Lock()
			leave()
			p.mu.Unlock()
			return nil, ctx.Err()
		case <-ch:
		}
		p.mu.Lock()
	}
}

// topUp starts workers in the background until the idle ones, with those
// starting for any owner, fill the reserve: the owner that takes the last
// of them (the first request of a new pool) leaves it full for the next;
// p.mu is held.
func (p *Pool) topUp() {
	for len(p.idle)+p.warmingAny < p.cfg.Reserve && p.total < p.cfg.Workers && !p.closed {
		p.total++
		p.warming++
		p.warmingAny++
		go p.warm("")
	}
}

// broadcast wakes every waiter; p.mu is held.
func (p *Pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// warm starts a worker for owner ("": for any) and, once it is ready,
// adds it to the idle ones; the caller counted it in total and warming.
func (p *Pool) warm(owner string) {
	fresh, err := p.spawn()
	if err == nil {
		fresh.owner = owner
	}
	if err == nil && !prime(fresh) {
		p.stop(fresh)
		fresh, err = nil, errors.New("the worker did not start")
	}
	p.mu.Lock()
	p.warming--
	if owner == "" {
		p.warmingAny--
	}
	if err != nil || p.closed {
		p.total--
	} else {
		p.idle = append(p.idle, fresh)
		fresh = nil
	}
	p.broadcast()
	p.mu.Unlock()
	if fresh != nil {
		p.stop(fresh)
	}
}

// prime has a fresh worker answer an empty request, so that it is counted
// idle only once it is ready: starting one (the runtime, the binary's
// packages, its limits) costs tens of milliseconds of CPU, several times
// that in wall time beside busy workers, which another owner's delivery
// taking it would wait for (110-150 ms in faults row 6d).
func prime(w *worker) bool {
	d := time.Now().Add(readyAllowance)
	_ = w.in.SetWriteDeadline(d)
	_ = w.out.SetReadDeadline(d)
	// A trivial program, so that gojq's own first-use work is done too.
	if writeFrame(w.in, request{Op: "compile", Exprs: []string{"."}}) != nil || writeRaw(w.in, nil) != nil {
		return false
	}
	for {
		var rep reply
		if readFrame(w.r, &rep) != nil {
			return false
		}
		if rep.Done {
			return !rep.Retire
		}
	}
}

// reapLater reaps w, killed past a deadline, in the background: what it
// was killed for needs nothing of how it ended, and a worker demoted to
// nice 19 on a loaded machine waits for a core to exit as long as it
// waited to run (110-450 ms beside two CPU burners, on the time of the
// caller's next rules). Its slot in the pool's total is given back only
// once it is reaped (release), so the processes alive, dying ones
// included, stay within Workers.
func (p *Pool) reapLater(w *worker) {
	w.reaped = make(chan struct{})
	pid := w.cmd.Process.Pid
	go func() {
		if p.onReap != nil {
			p.onReap(pid)
		}
		_ = w.cmd.Wait()
		close(w.reaped)
	}()
}

// release gives back owner's worker w (nil: a spawn failed); a worker that
// is not healthy, or one too many idle, is killed.
func (p *Pool) release(owner string, w *worker, healthy bool) {
	p.mu.Lock()
	if p.owners[owner]--; p.owners[owner] <= 0 {
		delete(p.owners, owner)
	}
	keep := w != nil && healthy && !p.closed && len(p.idle) < p.cfg.Idle && w.requests < p.cfg.MaxRequests
	reaping := w != nil && w.reaped != nil
	switch {
	case keep:
		p.idle = append(p.idle, w)
	case !reaping:
		p.total--
	}
	// A worker killed past a limit is replaced here, on the time of the
	// owner whose program it ran, so that the next owner finds one warm.
	refill := w != nil && !healthy && !p.closed && len(p.idle)+p.warmingAny < warmMin && p.total < p.cfg.Workers
	if refill {
		p.total++
		p.warming++
		p.warmingAny++
	}
	p.broadcast()
	p.mu.Unlock()
	if w != nil && !keep {
		p.stop(w)
	}
	if reaping {
		go func() {
			<-w.reaped
			p.mu.Lock()
			p.total--
			p.broadcast()
			p.mu.Unlock()
		}()
	}
	if refill {
		p.warm("")
	}
}

// warmMin is how many idle workers a kill is replaced up to.
const warmMin = 2

// worker is one worker process and its pipes.
type worker struct {
	cmd      *exec.Cmd
	in, out  *os.File // its stdin (we write), its stdout (we read)
	r        *bufio.Reader
	stderr   *os.File // an unlinked file: why it died
	requests int
	dead     bool
	// demoted: its priority was lowered (demote); it is not reused.
	demoted bool
	// reaped, once set, is closed when the killed worker is reaped
	// (reapLater).
	reaped chan struct{}
	// owner is the owner it last served (or is started for).
	owner string
}

func (p *Pool) spawn() (*worker, error) {
	exe := p.cfg.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errf, err := os.CreateTemp("", "switchboard-rule-worker-*.err")
	if err == nil {
		_ = os.Remove(errf.Name())
	}
	cmd := exec.Command(exe, workerArg)
	// A clean environment: the server's (its secret key among it) is not
	// the worker's business.
	cmd.Env = []string{
		workerEnv + "=1", workerMemEnv + "=" + strconv.FormatInt(p.cfg.Memory, 10),
		"GOMAXPROCS=1", "GOMEMLIMIT=" + strconv.FormatInt(p.cfg.Memory*3/4, 10), "GOTRACEBACK=single",
		// One malloc arena (cgo's threads use C's malloc): glibc gives
		// each new thread an arena of its own, 64 MiB of address space
		// reserved, so that on a loaded machine, where the runtime starts
		// a thread for each syscall that blocks long enough, a worker
		// gained 72 MiB of address space a thread, no program's doing,
		// and was retired (or would reach RLIMIT_AS) after trivial
		// requests.
		"MALLOC_ARENA_MAX=1",
	}
	if p.spaceGrow > 0 {
		cmd.Env = append(cmd.Env, workerSpaceEnv+"="+strconv.FormatInt(p.spaceGrow, 10))
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if errf != nil {
		cmd.Stderr = errf
	}
	// A session of its own: where the kernel shares the CPU between
	// sessions first (autogroup), the worker's is its own group, which
	// demote can lower as a whole (see demote).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		if errf != nil {
			errf.Close()
		}
		return nil, err
	}
	p.spawned.Add(1)
	return &worker{cmd: cmd, in: inW, out: outR, r: bufio.NewReaderSize(outR, 64<<10), stderr: errf}, nil
}

// stop kills w and reaps it.
func (p *Pool) stop(w *worker) {
	if !w.dead {
		p.killed.Add(1)
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		w.dead = true
	}
	w.in.Close()
	w.out.Close()
	if w.stderr != nil {
		w.stderr.Close()
	}
}

// roundTrip sends req to w and reads its replies into results, each within
// per (or ctx's deadline, if sooner). It returns how many results it
// filled and whether w may serve again.
func (p *Pool) roundTrip(ctx context.Context, w *worker, req request, per time.Duration, results []Result) (int, bool) {
	w.requests++
	deadline := func() (time.Time, bool) {
		d := time.Now().Add(per)
		if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
			return dl, true
		}
		return d, false
	}
	// A caller that goes away stops the read at once.
	stopRead := context.AfterFunc(ctx, func() { _ = w.out.SetReadDeadline(time.Now()) })
	defer stopRead()
	d, writeBudget := deadline()
	_ = w.in.SetWriteDeadline(d)
	err := writeFrame(w.in, req)
	if err == nil {
		err = writeRaw(w.in, req.Input)
	}
	if err != nil {
		results[0] = p.death(ctx, w, err, per, writeBudget)
		return 1, false
	}
	// The worker first says it has the input: starting and decoding cost
	// no program anything, so they have their own allowance.
	ready := false
	var cpuStart time.Duration
	var since time.Time // when the worker said it was ready
	// Once ready, a watcher lowers the worker's priority when one
	// program runs past demoteAfter of CPU time; answered counts the
	// programs answered, so that it measures each from its start.
	// lowered is, once the watcher demoted the worker, 1 + the index of
	// the program it ran long.
	var answered, lowered atomic.Int64
	stopWatch := func() {}
	defer func() { stopWatch() }()
	for i := 0; ; {
		d, isBudget := deadline()
		if !ready {
			d, isBudget = time.Now().Add(readyAllowance), false
			if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
				d, isBudget = dl, true
			}
		}
		_ = w.out.SetReadDeadline(d)
		if ctx.Err() != nil {
			// The caller went away before this deadline was set: the
			// stop stopRead set was overwritten; stop the read now.
			_ = w.out.SetReadDeadline(time.Now())
		}
		var rep reply
		err := readFrame(w.r, &rep)
		// A program's own limit is the CPU time it used, as the kernel
		// counts it: on a loaded machine a worker waiting for a core is
		// not the program's fault. Past its wall deadline, a worker that
		// has not used its programs' time yet gets the difference (the
		// caller's budget still bounds the wall time), up to wallCap of
		// its programs' time: a worker that gets no CPU at all (stopped,
		// or starved for that long) is given up, whatever it used.
		for ready && errors.Is(err, os.ErrDeadlineExceeded) && !isBudget && ctx.Err() == nil {
			used, ok := cpuTime(w.cmd.Process.Pid)
			left := per*time.Duration(i+1) - (used - cpuStart)
			if !ok || left < 10*time.Millisecond {
				break
			}
			if lowered.Load() == int64(i)+1 {
				// Demoted while it ran: it has shown itself heavy, and at
				// nice 19 on a loaded machine it earns its CPU time
				// slowly, if at all. Its limit and grace are all the
				// wall time it gets: waiting longer is what the rules
				// after it would pay (beside two CPU burners, a routing
				// rule after two endless ones ran out of the budget, 4
				// runs in 4).
				break
			}
			limit := since.Add(wallCap * per * time.Duration(i+1))
			if !time.Now().Before(limit) {
				break
			}
			d, isBudget = time.Now().Add(left), false
			if limit.Before(d) {
				d = limit
			}
			if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
				d, isBudget = dl, true
			}
			_ = w.out.SetReadDeadline(d)
			if ctx.Err() != nil { // cancelled while the deadline moved
				_ = w.out.SetReadDeadline(time.Now())
			}
			err = readFrame(w.r, &rep)
		}
		if err == nil && !ready {
			if rep.Ready {
				ready = true
				since = time.Now()
				cpuStart, _ = cpuTime(w.cmd.Process.Pid)
				after := demoteAfter(per-p.cfg.Grace, per)
				if p.demoteAt > 0 {
					after = p.demoteAt
				}
				stopWatch = p.watch(w, after, cpuStart, &answered, &lowered)
				if p.onReady != nil {
					p.onReady(w.cmd.Process.Pid)
				}
				continue
			}
			if !rep.Done {
				err = errors.New("worker answered before it was ready")
			}
		}
		if err == nil && !rep.Done && (rep.Index != i || i >= len(results)) {
			err = fmt.Errorf("worker answered program %d, expected %d", rep.Index, i)
		}
		if err != nil {
			// Stopped before the worker is killed and reaped: its pid
			// must not be touched once it may be another process's.
			stopWatch()
			if i >= len(results) {
				return i, false
			}
			results[i] = p.death(ctx, w, err, per, isBudget)
			return i + 1, false
		}
		if rep.Done {
			stopWatch()
			return i, !rep.Retire && !w.demoted
		}
		results[i] = fromReply(rep)
		i++
		answered.Store(int64(i))
		if l := lowered.Load(); l > 0 && l <= int64(i) {
			// The program that ran long is answered: the ones after it
			// run in a fresh worker at the normal priority, not at nice
			// 19 on this one, where on a busy machine they crawled past
			// the rules' budget (ci4: an ordinary rule after an endless
			// one was not run).
			stopWatch()
			return i, false
		}
	}
}

// demoteAfter is the CPU time one program may use before its worker's
// priority is lowered, for a program whose own limit is timeout and which
// is killed past per: a quarter of timeout (62 ms of a rule's 250 ms; an
// ordinary rule compiles and runs in well under a millisecond). A
// race-built worker (a test binary of another package, under -race) runs
// several times slower: it is not demoted before it is killed (at its
// whole timeout it was, and on a busy machine the rules after an endless
// one crawled at nice 19 past the budget: ci4).
func demoteAfter(timeout, per time.Duration) time.Duration {
	if raceBuild {
		return per
	}
	return timeout / 4
}

// demoteTick is how often a busy worker's CPU time is read (its unit,
// clockTick, is 10 ms).
const demoteTick = 10 * time.Millisecond

// watch reads w's CPU time while it runs the programs of one request and
// demotes it once one program (the one after the answered first ones) has
// used after of it, base being its CPU time when it became ready. On a
// machine with few cores a program that runs for its whole limit (a regex
// that cannot be interrupted; one step that allocates a memory's worth),
// or eight of them for one owner, would otherwise take the CPU from the
// server and from every other owner's rules as equals: 238 ms for another
// owner's delivery in faults row 6d, its worker taking 110-150 ms to
// start beside them. Demoted, it still runs, on the CPU nothing else
// wants, until its own limits stop it; its worker is not reused, so that
// no later program starts demoted. It returns the stop, which waits for
// the watcher to end.
func (p *Pool) watch(w *worker, after, base time.Duration, answered, lowered *atomic.Int64) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	pid := w.cmd.Process.Pid
	demoted := false // the watcher's until ended is closed
	go func() {
		defer close(ended)
		tick := time.NewTicker(demoteTick)
		defer tick.Stop()
		seen := int64(0)
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
			if n := answered.Load(); n != seen {
				// The program that runs now started since the last tick:
				// its time counts from here (a tick's worth less).
				seen, base = n, used
				continue
			}
			if used-base >= after {
				demoted = true
				lowered.Store(seen + 1)
				demote(pid)
				if p.onDemote != nil {
					p.onDemote(pid)
				}
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-ended
			w.demoted = w.demoted || demoted
		})
	}
}

// demote gives every thread of process pid the lowest priority (nice 19):
// Linux keeps a nice value per thread, and a thread inherits its
// creator's, so a thread the runtime starts later is demoted too.
//
// A thread's nice value only ranks it within its scheduling group. Where
// the kernel groups tasks by session (autogroup, the default of desktop
// and many server kernels, for tasks outside a cgroup of their own), the
// groups share the CPU as equals first: a worker demoted only per thread
// still took half of the CPU from a PostgreSQL server on the same
// machine, whatever its nice value. So the worker's session (its own,
// spawn) is lowered as a group too. Faults row 6d, six runs alternating
// on a quiet 2-core machine: another owner's deliveries beside the
// hostile dry runs p99 74-90 ms demoted per thread, 31-47 ms with the
// group. Where there is no autogroup the write fails and the threads'
// nice values are what counts.
func demote(pid int) {
	proc := "/proc/" + strconv.Itoa(pid)
	tasks, err := os.ReadDir(proc + "/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, demotedNice)
		}
	}
	_ = os.WriteFile(proc+"/autogroup", []byte(strconv.Itoa(demotedNice)), 0)
}

// demotedNice is a demoted worker's nice value, the lowest priority.
const demotedNice = 19

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time process pid has used, user and system, from
// /proc.
func cpuTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis (field 3, state, is the first).
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0, false
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

func fromReply(rep reply) Result {
	switch {
	case rep.NotAllowed != "":
		return Result{Kind: NotAllowed, Detail: rep.NotAllowed}
	case rep.CompileErr != "":
		return Result{Kind: NoCompile, Detail: rep.CompileErr}
	case rep.Err != "":
		return Result{Kind: Failed, Detail: rep.Err}
	}
	r := Result{Kind: Ran, Output: rep.Output, Truthy: rep.Truthy}
	if rep.Text != nil {
		r.HasText, r.Text = true, *rep.Text
	}
	return r
}

// death kills w after err and says which limit stopped its program.
func (p *Pool) death(ctx context.Context, w *worker, err error, per time.Duration, isBudget bool) Result {
	timedOut := errors.Is(err, os.ErrDeadlineExceeded)
	p.killed.Add(1)
	_ = w.cmd.Process.Kill()
	w.dead = true
	// Whether the budget ran out is read from its deadline and the clock:
	// the context's own timer may not have fired yet when a read or write
	// cut at that same deadline returns.
	if dl, ok := ctx.Deadline(); ok && timedOut && !time.Now().Before(dl) {
		isBudget = true
	}
	switch {
	case ctx.Err() != nil || (timedOut && isBudget):
		p.reapLater(w)
		return Result{Kind: Stopped, Detail: "stopped: the rules' time budget ran out"}
	case timedOut:
		p.reapLater(w)
		return Result{Kind: Stopped, Detail: fmt.Sprintf("stopped: ran past its time limit of %v", per)}
	}
	// Why it died is read from how it ended.
	_ = w.cmd.Wait()
	why := ""
	if w.stderr != nil {
		b := make([]byte, 4096)
		n, _ := w.stderr.ReadAt(b, 0)
		why = string(b[:n])
	}
	status := w.cmd.ProcessState
	switch {
	case strings.Contains(why, "out of memory") || strings.Contains(why, "cannot allocate memory") ||
		strings.Contains(why, "memory limit") || strings.Contains(why, "pthread_create failed") ||
		strings.Contains(why, "failed to create new OS thread"):
		return Result{Kind: Stopped, Detail: fmt.Sprintf("stopped: exceeded its memory limit of %d MiB", p.cfg.Memory>>20)}
	case strings.Contains(why, "CPU time limit") || (status != nil && status.ExitCode() == exitCPU):
		return Result{Kind: Stopped, Detail: "stopped: exceeded its CPU time limit"}
	case errors.Is(err, errFrameTooLarge):
		return Result{Kind: Stopped, Detail: "stopped: its answer was too large"}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE):
		line, _, _ := strings.Cut(strings.TrimSpace(why), "\n")
		if status != nil && !status.Exited() {
			if ws, ok := status.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return Result{Kind: Stopped, Detail: "stopped: exceeded its CPU time limit"}
			}
		}
		if line == "" && status != nil {
			line = status.String()
		}
		return Result{Kind: Stopped, Detail: "stopped: its rule worker died: " + line}
	}
	return Result{Kind: Stopped, Detail: "stopped: its rule worker failed: " + err.Error()}
}
