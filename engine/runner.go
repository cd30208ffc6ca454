package engine

import (
	"sync/atomic"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/wheel"
)

// runner is one probe of one owned target: its spec, its checker, its
// state machine and the figures of its last runs. The executor runs it;
// the fields under "Execution" are the executor's.
type runner struct {
	entry *entry
	typ   probe.Type
	id    wheel.ID // immutable; allocated by the executor

	// Guarded by entry.mu.
	spec      *probe.Spec
	eff       *probe.Effective // shared (timingSet): never modified
	checker   Checker
	state     probe.State
	scheduled bool // on the timer wheel
	retired   bool // removed from its target for good

	lastProbe   time.Time
	lastMessage string
	lastLatency time.Duration
	total       uint64
	recent      recentRing

	// Execution.
	//
	// busy is the one "a run is in progress" flag: set (compare-and-swap)
	// by whoever starts a run, cleared under entry.mu once the run's
	// outcome was applied. A probe never overlaps itself.
	busy atomic.Bool
	// unwritten counts the probe's transitions submitted to the store and
	// not yet written (or refused). While one is and the store is behind
	// (Options.MaxUnwritten), a due fire is skipped: a probe that flaps
	// faster than the store writes is slowed to the store's pace, so the
	// queue of writes stays bounded — memory, Watch lag, API writes not
	// stuck behind an ever longer queue — and no transition is dropped.
	unwritten atomic.Int32
	// gen is bumped (under entry.mu) when the outcomes of runs already
	// started must be dropped; a run takes it when it is started, so a fire
	// collected before a reset, update or delete is never applied to the
	// new state.
	gen atomic.Uint64
	// schedGen is the wheel generation of the current schedule (Fire.Gen),
	// 0 while the probe has none: a fire of another generation was
	// collected for an earlier schedule of the same wheel ID (an earlier
	// holder of the ID, or this probe before it was unscheduled) and is
	// stale.
	schedGen atomic.Uint32
	// Guarded by entry.mu:
	run   *runControl // the run in progress, once it has started checking
	after *afterRun   // nil unless something waits for the run in progress
}

// afterRun is what waits for a runner's run in progress to end. Rare (a
// trigger during a run, a checker replaced by an update), so a runner
// holds it only then.
type afterRun struct {
	waiters []chan<- runResult // triggers waiting for the run in progress
	closing []Checker          // replaced while the run in progress used them: closed when it ends
}

// afterRunLocked returns r's afterRun, making it; entry.mu held.
func (r *runner) afterRunLocked() *afterRun {
	if r.after == nil {
		r.after = &afterRun{}
	}
	return r.after
}

// runResult is what a trigger waiting for a run receives: the run's
// outcome and, when the outcome changed what is published, a channel that
// receives once that change is durable and visible (nil otherwise).
type runResult struct {
	out  probe.Outcome
	done <-chan error
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

// replaceCheckerLocked makes c the checker of r and closes the previous one, at
// once when no run is using it, else when the run in progress ends (the
// Checker contract: Close never overlaps Check); entry.mu held.
func (r *runner) replaceCheckerLocked(c Checker) {
	old := r.checker
	r.checker = c
	if old == nil {
		return
	}
	if r.busy.Load() {
		a := r.afterRunLocked()
		a.closing = append(a.closing, old)
	} else {
		old.Close()
	}
}
