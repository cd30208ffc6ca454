package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/timeout"
	"github.com/probed/probed/engine/wheel"
)

// maxIdleWorkers bounds the probe goroutines kept waiting for work.
const maxIdleWorkers = 256

// keepIdleWorkers is how many idle probe goroutines per CPU the pool
// keeps beyond the demand of the last second (see pool.resize).
const keepIdleWorkers = 4

// resizeEvery is how often the probe goroutine pool is sized by the runs
// in flight (pool.resize keeps resizeSamples of them: the last second).
const resizeEvery = time.Second / resizeSamples

// executor runs probes. Every run of a probe goes through it — the timer
// wheel's fires, the first run when a probe starts, and triggers — so one
// type decides when a probe may run:
//
//   - a probe never overlaps itself: runner.busy is its one busy flag; a
//     due fire of a busy probe is skipped and counted, a trigger joins the
//     run in progress;
//   - at most maxInflight runs are in progress; beyond it a due fire is
//     skipped and counted, a trigger fails with ErrResourceExhausted;
//   - every run is waited for: shutdown returns once none is in progress,
//     and none starts after it;
//   - wheel IDs are allocated here, within the wheel's capacity, so a
//     probe that could never be scheduled is refused when its target is
//     created; scheduling errors are returned, never dropped.
//
// A run is one step (Engine.step) on a pooled goroutine.
type executor struct {
	clock       clockwork.Clock
	wheel       *wheel.Wheel
	step        func(ctx context.Context, r *runner, gen uint64)
	maxInflight int64
	// unwritten counts the probe transitions submitted to the store and
	// not yet written (runner.unwritten, summed); past maxUnwritten a
	// probe with one of them skips its due runs.
	unwritten    atomic.Int64
	maxUnwritten int64
	// capacity is the number of probes that can have an ID (the wheel's
	// MaxID+1; tests lower it).
	capacity int

	// inflight counts runs started and not finished; closed refuses new
	// ones. shutdown sets closed, then waits on drained until inflight is
	// 0.
	inflight atomic.Int64
	closed   atomic.Bool
	drained  chan struct{}

	pool      atomic.Pointer[pool] // set by begin
	stopWheel context.CancelFunc
	drivers   sync.WaitGroup // the wheel's Run and resizeLoop

	mu    sync.RWMutex // guards slots and free
	slots []*runner    // by wheel.ID
	free  []wheel.ID
	// gens numbers the schedules put on the wheel (runner.schedGen), so
	// that a fire collected for an ID's earlier schedule is told from one
	// of its current schedule.
	gens atomic.Uint32

	// cancelling counts runs cancelled (their timeout passed, or their
	// probe was stopped) that have not ended yet.
	cancelling atomic.Int64

	skippedOverlap atomic.Uint64 // a due fire found its probe running
	skippedBusy    atomic.Uint64 // a due fire found maxInflight runs in progress
	skippedWrite   atomic.Uint64 // a due fire found its probe's last transition not yet written
	skippedLease   atomic.Uint64 // a due fire found the replica's lease over (Options.MayProbe)
	// mayProbe is Options.MayProbe (nil: always).
	mayProbe       func() bool
	scheduleErrors atomic.Uint64 // schedules the wheel refused
}

func newExecutor(clock clockwork.Clock, o *Options, step func(context.Context, *runner, uint64)) *executor {
	x := &executor{
		clock:        clock,
		step:         step,
		maxInflight:  int64(o.MaxInflight),
		maxUnwritten: int64(o.MaxUnwritten),
		capacity:     int(wheel.MaxID) + 1,
		drained:      make(chan struct{}, 1),
		mayProbe:     o.MayProbe,
	}
	x.wheel = wheel.New(clock, x.dispatch, wheel.WithTick(o.Tick), wheel.WithShards(o.Shards))
	return x
}

// begin starts driving probes: the wheel's drivers hand due fires to
// dispatch, and runs go to a pool of reused goroutines under ctx. Call
// shutdown, after ctx is done, to stop.
func (x *executor) begin(ctx context.Context) {
	x.pool.Store(newPool(maxIdleWorkers, keepIdleWorkers*runtime.GOMAXPROCS(0), func(j job) { x.step(ctx, j.r, j.gen) }))
	wheelCtx, stopWheel := context.WithCancel(context.WithoutCancel(ctx))
	x.stopWheel = stopWheel
	x.drivers.Go(func() { _ = x.wheel.Run(wheelCtx) }) // only ErrRunning, and begin is called once
	x.drivers.Go(func() { x.resizeLoop(wheelCtx) })
}

// resizeLoop sizes the probe goroutine pool by the runs in flight, every
// resizeEvery on the engine's clock, until ctx is done.
func (x *executor) resizeLoop(ctx context.Context) {
	t := x.clock.NewTicker(resizeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			x.pool.Load().resize(x.inflight.Load())
		}
	}
}

// shutdown stops the wheel, refuses new runs, waits until none is in
// progress (they end early once begin's ctx is done) and for the pool's
// workers. No run starts after it returns.
func (x *executor) shutdown() {
	if x.stopWheel != nil {
		x.stopWheel()
	}
	x.drivers.Wait()
	x.closed.Store(true)
	for x.inflight.Load() != 0 {
		<-x.drained
	}
	if p := x.pool.Load(); p != nil {
		p.close()
	}
}

// acquire counts a run about to start; it reports false (counting
// nothing) when maxInflight runs are in progress or the executor stopped.
func (x *executor) acquire() (ok, busy bool) {
	if x.inflight.Add(1) > x.maxInflight {
		x.release()
		return false, true
	}
	// closed is read after inflight was raised: shutdown, which sets
	// closed before it reads inflight, either sees this run or this run
	// sees closed.
	if x.closed.Load() {
		x.release()
		return false, false
	}
	return true, false
}

// release ends what acquire counted.
func (x *executor) release() {
	if x.inflight.Add(-1) == 0 && x.closed.Load() {
		select {
		case x.drained <- struct{}{}:
		default:
		}
	}
}

// start runs r, which the caller marked busy, as generation gen on a
// pooled goroutine. When it cannot (maxInflight runs in progress, or the
// executor stopped) it clears busy and returns the reason:
// errInflight (an ErrResourceExhausted; see inflightError) or ErrClosed.
// It formats nothing: a due fire skipped under load costs no allocation.
func (x *executor) start(r *runner, gen uint64) error {
	ok, busy := x.acquire()
	if ok {
		if p := x.pool.Load(); p != nil && p.submit(job{r: r, gen: gen}) {
			return nil
		}
		x.release()
	}
	r.busy.Store(false)
	if busy {
		return errInflight
	}
	return ErrClosed
}

// errInflight is start's refusal at maxInflight runs in progress.
var errInflight = fmt.Errorf("too many probes running at once: %w", ErrResourceExhausted)

// inflightError says why a run could not start, for a caller that
// reports it: at maxInflight, the bound and its flag.
func (x *executor) inflightError(err error) error {
	if errors.Is(err, errInflight) {
		return fmt.Errorf("at most %d probes run at once (--max-inflight): %w", x.maxInflight, ErrResourceExhausted)
	}
	return err
}

// dispatch starts the probes the wheel found due. It runs on a wheel
// driver goroutine and never blocks: a probe still running, or one due
// while maxInflight runs are in progress, is skipped (and counted), never
// queued.
func (x *executor) dispatch(fires []wheel.Fire) {
	if x.mayProbe != nil && !x.mayProbe() {
		x.skippedLease.Add(uint64(len(fires)))
		return
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, f := range fires {
		var r *runner
		if int(f.ID) < len(x.slots) {
			r = x.slots[f.ID]
		}
		if r == nil || f.Gen != r.schedGen.Load() {
			continue // freed, or a fire of the ID's previous holder
		}
		if r.unwritten.Load() > 0 && x.unwritten.Load() >= x.maxUnwritten {
			x.skippedWrite.Add(1)
			continue
		}
		if !r.busy.CompareAndSwap(false, true) {
			x.skippedOverlap.Add(1)
			continue
		}
		if err := x.start(r, r.gen.Load()); errors.Is(err, errInflight) {
			x.skippedBusy.Add(1)
		}
	}
}

// runNow starts a run of r at once, outside the wheel, unless it is
// running already (or cannot start; the wheel runs it next time).
func (x *executor) runNow(r *runner) {
	if x.mayProbe != nil && !x.mayProbe() {
		x.skippedLease.Add(1)
		return
	}
	if r.busy.CompareAndSwap(false, true) {
		if err := x.start(r, r.gen.Load()); errors.Is(err, errInflight) {
			x.skippedBusy.Add(1)
		}
	}
}

// triggerLocked makes the caller wait for a run of r: the run in progress, or a
// new one started now. The result arrives on the returned channel once the
// run's outcome was applied. entry.mu held.
func (x *executor) triggerLocked(r *runner) (<-chan runResult, error) {
	ch := make(chan runResult, 1)
	if r.busy.CompareAndSwap(false, true) {
		if err := x.start(r, r.gen.Load()); err != nil {
			return nil, x.inflightError(err)
		}
	}
	a := r.afterRunLocked()
	a.waiters = append(a.waiters, ch)
	return ch, nil
}

// endLocked finishes the run of r that applied (or dropped) out: it closes the
// checkers replaced during the run, frees the ID of a retired runner,
// clears busy, releases what acquire counted and, last, tells the waiters
// (triggers, Disown), so that a waiter finds the run ended in every
// respect: not in flight, its checker closed. entry.mu held.
func (x *executor) endLocked(r *runner, res runResult) {
	a := r.after
	r.after = nil
	if a != nil {
		for _, c := range a.closing {
			c.Close()
		}
	}
	r.run = nil
	r.busy.Store(false)
	if r.retired {
		x.freeID(r)
	}
	x.release()
	if a != nil {
		for _, w := range a.waiters {
			w <- res // buffered: one per waiter
		}
	}
}

// retireLocked stops r for good: its schedule, its run in progress (cancelled;
// its outcome will be dropped), its checker (closed now, or when that run
// ends). Its ID is freed now, or when the run ends. It returns a channel
// that receives when no run of r is in progress any more (nil if none
// is). entry.mu held.
func (x *executor) retireLocked(r *runner) <-chan runResult {
	if r.retired {
		return nil
	}
	r.retired = true
	x.unscheduleLocked(r)
	x.interruptLocked(r)
	r.replaceCheckerLocked(nil)
	if !r.busy.Load() {
		x.freeID(r)
		return nil
	}
	ch := make(chan runResult, 1)
	a := r.afterRunLocked()
	a.waiters = append(a.waiters, ch)
	return ch
}

// runControl cancels one run: at its timeout (expire, on a wheel driver)
// or when its probe is stopped (stop, under entry.mu). A cancelled run is
// counted in executor.cancelling until it has ended (finish), so a run
// that does not stop when told is seen.
type runControl struct {
	x      *executor
	cancel context.CancelCauseFunc
	done   atomic.Bool // cancelled, or finished
}

func (c *runControl) expire() { c.stop(timeout.ErrExpired) }

func (c *runControl) stop(cause error) {
	if c.done.CompareAndSwap(false, true) {
		c.x.cancelling.Add(1)
		c.cancel(cause)
	}
}

// finish is called once the run has ended (after executor.end).
func (c *runControl) finish() {
	if !c.done.CompareAndSwap(false, true) {
		c.x.cancelling.Add(-1)
	}
}

// interruptLocked drops the outcome of r's run in progress (if any) and of
// every fire collected before now, and cancels that run. entry.mu held.
func (x *executor) interruptLocked(r *runner) {
	r.gen.Add(1)
	if r.run != nil {
		r.run.stop(context.Canceled)
	}
}

// alloc gives r a wheel ID; ErrResourceExhausted when every ID is taken.
// Until r is scheduled no fire runs it: a fire collected for the ID's
// previous holder must not start r before its schedule (initial delay).
func (x *executor) alloc(r *runner) error {
	r.schedGen.Store(0)
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.free); n > 0 {
		r.id = x.free[n-1]
		x.free = x.free[:n-1]
		x.slots[r.id] = r
		return nil
	}
	if len(x.slots) >= x.capacity {
		return fmt.Errorf("at most %d probes can be scheduled (the timer wheel's capacity): %w", x.capacity, ErrResourceExhausted)
	}
	r.id = wheel.ID(len(x.slots))
	x.slots = append(x.slots, r)
	return nil
}

// room refuses n more probes when the wheel has not that many IDs left
// now (they are not reserved).
func (x *executor) room(n int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n > 0 && len(x.free)+x.capacity-len(x.slots) < n {
		return fmt.Errorf("at most %d probes can be scheduled (the timer wheel's capacity): %w", x.capacity, ErrResourceExhausted)
	}
	return nil
}

func (x *executor) freeID(r *runner) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if int(r.id) < len(x.slots) && x.slots[r.id] == r {
		x.slots[r.id] = nil
		x.free = append(x.free, r.id)
	}
}

// scheduleLocked puts r on the wheel: first at first, then every period (first
// may be in the past: the run is then due at once). entry.mu held.
func (x *executor) scheduleLocked(r *runner, first time.Time, period time.Duration) error {
	return x.scheduledLocked(r, x.wheel.Schedule(r.id, x.newScheduleLocked(r), first, period))
}

// newScheduleLocked gives r the generation of a new schedule and returns it: a
// fire collected for any earlier schedule of r's wheel ID (this probe's or
// that of an earlier holder of the ID) no longer runs r. Never 0, which
// stands for "no schedule". entry.mu held.
func (x *executor) newScheduleLocked(r *runner) uint32 {
	g := x.gens.Add(1)
	for g == 0 {
		g = x.gens.Add(1)
	}
	r.schedGen.Store(g)
	return g
}

// spreadLocked puts r on the wheel at a point of [now, now+period) fixed by its
// ID (no thundering herd when many probes start together), then every
// period. entry.mu held.
func (x *executor) spreadLocked(r *runner, now time.Time, period time.Duration) error {
	return x.scheduledLocked(r, x.wheel.Spread(r.id, x.newScheduleLocked(r), now, period))
}

// rescheduleLocked moves r's next run to next, then every period. entry.mu
// held.
func (x *executor) rescheduleLocked(r *runner, next time.Time, period time.Duration) error {
	if !r.scheduled {
		return nil
	}
	return x.scheduledLocked(r, x.wheel.Reschedule(r.id, next, period))
}

// setPeriodLocked changes r's period keeping its phase. entry.mu held.
func (x *executor) setPeriodLocked(r *runner, period time.Duration) error {
	if !r.scheduled {
		return nil
	}
	return x.scheduledLocked(r, x.wheel.Update(r.id, period))
}

// scheduledLocked records the outcome of a wheel call for r.
func (x *executor) scheduledLocked(r *runner, err error) error {
	r.scheduled = err == nil
	if err != nil {
		x.scheduleErrors.Add(1)
		x.wheel.Cancel(r.id)
		return fmt.Errorf("scheduling the %s probe of target %q: %w", r.typ, r.entry.name, err)
	}
	return nil
}

// unscheduleLocked takes r off the wheel. entry.mu held.
func (x *executor) unscheduleLocked(r *runner) {
	if r.scheduled {
		x.wheel.Cancel(r.id)
		r.scheduled = false
	}
}
