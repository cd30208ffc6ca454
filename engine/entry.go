package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/wheel"
)

// entry is one target's runtime state.
type entry struct {
	name string

	mu      sync.Mutex // guards everything below
	spec    *target.Spec
	status  Status // decided durable status; ahead of the published one until committed
	runners [probe.NumTypes]*runner
	// wasReady: the target has been ready since its creation or reset (for
	// the cold-start metric).
	wasReady bool
	// removed: deleted or lost; late outcomes are dropped.
	removed bool
	drain   *wheel.Timer
}

// runner is one probe of one target.
type runner struct {
	entry *entry
	typ   probe.Type
	id    wheel.ID // immutable

	// Guarded by entry.mu.
	spec    *probe.Spec
	eff     probe.Effective
	checker Checker
	state   probe.State
	// gen is bumped (under entry.mu) when the outcomes of runs already
	// started must be dropped; a run takes it when it is started, so a fire
	// collected before a reset, update or delete cannot pass for a run of
	// the new generation.
	gen       atomic.Uint64
	scheduled bool
	retired   bool // removed from its target; its ID is freed once it is not running
	waiters   []chan probe.Outcome

	lastProbe   time.Time
	lastMessage string
	lastLatency time.Duration
	total       uint64
	recent      recentRing

	// running is set by whoever starts a run (dispatch or a trigger) and
	// cleared under entry.mu once the outcome was applied: one probe never
	// overlaps itself.
	running atomic.Bool
}

// figures copies the counts and the last run's outcome into ps; entry.mu
// held.
func (r *runner) figures(ps *ProbeStatus) {
	ps.ConsecutiveSuccesses, ps.ConsecutiveFailures = r.state.ConsecutiveSuccesses(), r.state.ConsecutiveFailures()
	ps.LastProbeTime, ps.LastMessage, ps.LastLatency, ps.ProbesTotal = r.lastProbe, r.lastMessage, r.lastLatency, r.total
}

// period is the period that applies now: the initial period until the
// probe has first passed ("fast until ready").
func (r *runner) period() time.Duration {
	if !r.state.HasInitialized {
		return r.eff.InitialPeriod
	}
	return r.eff.Period
}

// drainQueue hands targets whose preStop sleep ended from the timer wheel
// (which must not block) to the drain goroutine.
type drainQueue struct {
	mu      sync.Mutex
	pending []*entry
	wake    chan struct{}
}

func (q *drainQueue) init() { q.wake = make(chan struct{}, 1) }

func (q *drainQueue) push(en *entry) {
	q.mu.Lock()
	q.pending = append(q.pending, en)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *drainQueue) take() []*entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending
	q.pending = nil
	return p
}

// drainLoop removes targets whose drain ended.
func (e *Engine) drainLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.drains.wake:
		}
		for _, en := range e.drains.take() {
			if err := e.remove(ctx, en); err != nil && ctx.Err() == nil {
				e.log.Error("removing drained target", "target", en.name, "err", err)
			}
		}
	}
}

// compactLoop trims the store's history to what memory retains: once at
// start, so that a process restarting faster than the interval (a crash
// loop) still trims what its predecessors left, and then every interval.
func (e *Engine) compactLoop(ctx context.Context) {
	const every = 10 * time.Second
	t := e.clock.NewTicker(every)
	defer t.Stop()
	for {
		e.compactIfDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// compactIfDue compacts the store when enough events have left memory.
func (e *Engine) compactIfDue(ctx context.Context) {
	const minDropped = 1024
	if before, ok := e.feed.compactionDue(minDropped); ok {
		if err := e.opts.Store.Compact(ctx, before); err != nil && ctx.Err() == nil {
			e.log.Error("compacting history", "before", before, "err", err)
		}
	}
}

// newRunner allocates a wheel ID for a probe of en; en.mu held.
func (e *Engine) newRunner(en *entry, typ probe.Type, spec *probe.Spec) *runner {
	r := &runner{entry: en, typ: typ, spec: spec, eff: e.effective(spec), state: probe.Initial(typ)}
	e.slotsMu.Lock()
	if n := len(e.free); n > 0 {
		r.id = e.free[n-1]
		e.free = e.free[:n-1]
		e.slots[r.id] = r
	} else {
		r.id = wheel.ID(len(e.slots))
		e.slots = append(e.slots, r)
	}
	e.slotsMu.Unlock()
	return r
}

// retireRunnerLocked stops r for good; en.mu held. Its wheel ID is freed
// now, or by the run in flight when it finishes.
func (e *Engine) retireRunnerLocked(r *runner) {
	if r.retired {
		return
	}
	r.retired = true
	r.gen.Add(1)
	if e.wheel != nil {
		e.wheel.Cancel(r.id)
	}
	r.scheduled = false
	if r.checker != nil {
		r.checker.Close()
		r.checker = nil
	}
	if !r.running.Load() {
		e.freeID(r)
	}
}

func (e *Engine) freeID(r *runner) {
	e.slotsMu.Lock()
	if e.slots[r.id] == r {
		e.slots[r.id] = nil
		e.free = append(e.free, r.id)
	}
	e.slotsMu.Unlock()
}

// retireLocked stops every probe of en; en.mu held.
func (e *Engine) retireLocked(en *entry) {
	en.removed = true
	for i, r := range en.runners {
		if r != nil {
			e.retireRunnerLocked(r)
			en.runners[i] = nil
		}
	}
	if en.drain != nil {
		en.drain.Stop()
		en.drain = nil
	}
}
