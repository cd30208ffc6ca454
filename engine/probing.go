package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/timeout"
	"github.com/probed/probed/engine/wheel"
)

// dispatch starts the probes the wheel found due. It runs on a wheel shard
// goroutine and never blocks: a probe still running is skipped (and
// counted), never queued; each run gets its own goroutine, so a target that
// hangs until its timeout delays no other.
func (e *Engine) dispatch(fires []wheel.Fire) {
	e.slotsMu.RLock()
	defer e.slotsMu.RUnlock()
	for _, f := range fires {
		var r *runner
		if int(f.ID) < len(e.slots) {
			r = e.slots[f.ID]
		}
		if r == nil {
			e.wheel.Done(f.ID)
			continue
		}
		if !r.running.CompareAndSwap(false, true) {
			e.skippedOverlap.Add(1)
			e.wheel.Done(f.ID)
			continue
		}
		if !e.start(r, r.gen.Load()) {
			e.wheel.Done(f.ID)
		}
	}
}

// start runs r, which the caller marked running, as generation gen in its
// own goroutine under the engine's probe context; when MaxInflight probes
// are running it skips (and counts) the run instead and reports false.
func (e *Engine) start(r *runner, gen uint64) bool {
	if e.inflight.Add(1) > int64(e.opts.MaxInflight) {
		e.inflight.Add(-1)
		r.running.Store(false)
		e.skippedBusy.Add(1)
		return false
	}
	e.probes.Add(1)
	if !e.pool.submit(job{r: r, gen: gen}) { // the engine is stopping
		e.probes.Done()
		e.inflight.Add(-1)
		r.running.Store(false)
		return false
	}
	return true
}

// execute runs one probe of generation gen and applies its outcome.
func (e *Engine) execute(ctx context.Context, r *runner, gen uint64) {
	defer e.probes.Done()
	en := r.entry
	en.mu.Lock()
	checker, timeout := r.checker, r.eff.Timeout
	en.mu.Unlock()
	start := e.clock.Now()
	out := e.check(ctx, r, checker, timeout)
	e.finish(ctx, r, gen, start, out)
	e.inflight.Add(-1)
	e.wheel.Done(r.id)
}

// check runs checker under the probe's timeout. A panic is recovered and
// reported as Unknown with its message; a run cut off by the timeout is a
// Failure that says so.
func (e *Engine) check(ctx context.Context, r *runner, checker Checker, limit time.Duration) (out probe.Outcome) {
	if checker == nil {
		return probe.Outcome{Result: probe.Unknown, Message: "probe has no checker (target being removed)"}
	}
	cctx, cancel := timeout.With(ctx, e.clock, limit)
	defer cancel()
	cctx = e.obs.ProbeStarted(cctx, r.entry.name, r.typ)
	start := e.clock.Now()
	defer func() {
		if p := recover(); p != nil {
			e.panics.Add(1)
			out = probe.Outcome{Result: probe.Unknown, Message: fmt.Sprintf("checker panicked: %v", p)}
			e.log.Error("checker panicked", "panic", p)
		}
		if out.Latency == 0 {
			out.Latency = e.clock.Since(start)
		}
		// Messages quote what probed servers said; the API carries them
		// in proto strings, which must be valid UTF-8, and bounded.
		out.Message = probe.BoundMessage(out.Message)
		e.obs.ProbeDone(cctx, r.entry.name, r.typ, out)
	}()
	out = checker.Check(cctx)
	if out.Result != probe.Success && timeout.Expired(cctx) && ctx.Err() == nil {
		msg := fmt.Sprintf("probe timed out after %v", limit)
		if out.Message != "" {
			msg += ": " + out.Message
		}
		out = probe.Outcome{Result: probe.Failure, Message: msg, Latency: out.Latency, Phases: out.Phases}
	}
	return out
}

// finish applies the outcome of a run of r started with generation gen:
// it answers triggers waiting for this run, then feeds the state machine
// unless the run is stale (the target changed, was reset or deleted, or the
// engine is stopping).
// It returns, when the outcome changed what is published, a channel that
// receives once the change is durable and visible (nil otherwise).
func (e *Engine) finish(ctx context.Context, r *runner, gen uint64, start time.Time, out probe.Outcome) <-chan error {
	en := r.entry
	en.mu.Lock()
	defer en.mu.Unlock()
	for _, w := range r.waiters {
		w <- out
	}
	r.waiters = r.waiters[:0]
	r.running.Store(false)
	if r.retired {
		e.freeID(r)
		return nil
	}
	// Not Active: deleted. Probes stop at Delete, also a run that started
	// after it (a fire collected before Delete cancelled it, or a run
	// whose goroutine read gen after Delete bumped it).
	if ctx.Err() != nil || en.removed || r.gen.Load() != gen || en.status.Phase != Active {
		return nil
	}
	r.total++
	r.lastProbe, r.lastMessage, r.lastLatency = start, out.Message, out.Latency
	r.recent.add(out)
	return e.observeLocked(en, r, out)
}

// observeLocked feeds one outcome to r's state machine and publishes what
// changed, returning the channel of that change (nil if none); en.mu held.
func (e *Engine) observeLocked(en *entry, r *runner, out probe.Outcome) <-chan error {
	next, change := r.state.Observe(out.Result, r.eff)
	r.state = next
	if !change.Transition && !change.Initialized {
		return nil
	}
	now := e.clock.Now()
	ps := &en.status.Probes[r.typ]
	ps.Result, ps.HasInitialized = next.Result, next.HasInitialized
	// The published status (events, snapshots, the store) carries the
	// outcome that caused the change; Get and List add the live figures.
	r.figures(ps)
	ev := Event{
		Kind:        KindInitialized,
		Probe:       r.typ,
		From:        next.Result,
		To:          next.Result,
		Consecutive: next.Run,
		Latency:     out.Latency,
		Initialized: change.Initialized,
		Message:     out.Message,
		Reason:      ReasonProbe,
	}
	if change.Transition {
		ev.Kind, ev.From = KindTransition, change.From
		ps.LastTransitionTime = now
	}
	done, err := e.commits.submit([]*Change{e.changeLocked(en, ev, false, now)}, true)
	if err != nil {
		// Only when the engine is stopping: the state is not persisted and
		// will be recomputed by the probes after a restart.
		e.log.Debug("transition not committed", "target", en.name, "err", err)
	}

	// Scheduling consequences.
	if change.Initialized && r.eff.InitialPeriod != r.eff.Period && r.scheduled {
		_ = e.wheel.Update(r.id, r.eff.Period)
	}
	if r.typ == probe.Startup && next.Result == probe.Success {
		// Started: the startup probe is done; liveness and readiness start
		// at once (not a period later).
		e.unscheduleLocked(r)
		e.startProbesLocked(en, now, false)
	}
	return done
}

// changeLocked builds the change publishing ev with en's current state;
// en.mu held.
func (e *Engine) changeLocked(en *entry, ev Event, specChanged bool, now time.Time) *Change {
	t := &Target{Spec: en.spec, Status: en.status}
	for typ, r := range en.runners {
		if r != nil {
			t.Status.Probes[typ].Effective = r.eff // floors applied
		}
	}
	ev.Name, ev.Time, ev.Labels = en.name, now, en.spec.Labels
	ev.Started, ev.Ready, ev.Live = t.Status.Started(), t.Status.Ready(), t.Status.Live()
	if ev.Kind.Lifecycle() {
		ev.Target = t
	}
	if ev.Ready && !en.wasReady {
		en.wasReady = true
		e.obs.Ready(en.name, now.Sub(en.status.StartTime))
	}
	return &Change{Name: en.name, Target: t, SpecChanged: specChanged, Event: ev}
}

// startProbesLocked schedules the probes of en that should run now: the
// startup probe until it has succeeded, then liveness and readiness. The
// first run of each is at the target's start plus the probe's initial delay
// exactly; one that is due already runs at once. With
// spread (after a restart) probes whose first run has passed are spread
// over one period instead, so a restart with many targets does not fire
// them all at once. en.mu held.
func (e *Engine) startProbesLocked(en *entry, now time.Time, spread bool) {
	if en.status.Phase != Active || en.removed {
		return
	}
	started := en.status.Started()
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		runs := (r.typ == probe.Startup) != started
		switch {
		case !runs:
			e.unscheduleLocked(r)
		case r.scheduled:
		default:
			first := en.status.StartTime.Add(r.eff.InitialDelay)
			switch {
			case first.After(now):
				_ = e.wheel.Schedule(r.id, first, r.period())
			case spread:
				_ = e.wheel.Spread(r.id, now, r.period())
			default:
				_ = e.wheel.Schedule(r.id, now.Add(r.period()), r.period())
				e.runNow(r)
			}
			r.scheduled = true
		}
	}
}

// runNow starts a run of r at once (outside the wheel), unless it is
// running already or MaxInflight probes are.
func (e *Engine) runNow(r *runner) {
	if r.running.CompareAndSwap(false, true) {
		e.start(r, r.gen.Load())
	}
}

func (e *Engine) unscheduleLocked(r *runner) {
	if r.scheduled {
		e.wheel.Cancel(r.id)
		r.scheduled = false
	}
}
