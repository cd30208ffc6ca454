package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/timeout"
)

// msgRunCancelled is the message of a run dropped before its check ran.
const msgRunCancelled = "run cancelled: the probe was changed, reset or stopped"

// step is one run of a probe, as kubelet's doProbe is: it runs r's check
// on the calling goroutine under the probe's timeout (a context cancelled
// with cause timeout.ErrExpired when the limit passes on the engine's
// clock; it has no Deadline), applies the outcome
// to the probe's state machine, submits the change this makes to what is
// published (if any), and ends the run (executor.end: waiting triggers get
// the outcome, busy is cleared, the run is no longer counted in flight).
// The caller — the executor — marked r busy, counted the run
// (executor.acquire) and took gen, the generation of the run. A run whose generation is
// stale when it begins (the probe changed, was reset or stopped since)
// checks nothing; one that becomes stale while checking is dropped.
//
// It returns the outcome and the change submitted (nil if none).
func (e *Engine) step(ctx context.Context, r *runner, gen uint64) (probe.Outcome, *Change) {
	en := r.entry
	en.mu.Lock()
	if r.gen.Load() != gen || r.retired {
		out := probe.Outcome{Result: probe.Unknown, Message: msgRunCancelled}
		e.exec.endLocked(r, runResult{out: out})
		en.mu.Unlock()
		return out, nil
	}
	checker, limit := r.checker, r.eff.Timeout
	// The timeout is a one-shot timer of the wheel: on the injected clock
	// (tests and production take the same path), with no goroutine and
	// no runtime timer per run; it fires within a tick of the limit.
	cctx, cancel := context.WithCancelCause(ctx)
	ctl := &runControl{x: e.exec, cancel: cancel}
	expiry := e.exec.wheel.After(limit, ctl.expire)
	r.run = ctl
	en.mu.Unlock()

	start := e.clock.Now()
	out := e.check(cctx, r, checker, limit)
	expiry.Stop()
	cancel(context.Canceled)

	en.mu.Lock()
	change, done := e.applyLocked(ctx, r, gen, start, out)
	e.exec.endLocked(r, runResult{out: out, done: done})
	en.mu.Unlock()
	ctl.finish()
	return out, change
}

// check runs checker under ctx, which ends at the probe's timeout. A
// panic is recovered and reported as Unknown with its message; a run cut
// off by the timeout is a Failure that says so. The message is made valid
// UTF-8: it quotes what a target said, and the API carries it in proto
// strings.
func (e *Engine) check(ctx context.Context, r *runner, checker Checker, limit time.Duration) (out probe.Outcome) {
	if checker == nil {
		return probe.Outcome{Result: probe.Unknown, Message: "probe has no checker (target being removed)"}
	}
	ctx = e.obs.ProbeStarted(ctx, r.entry.name, r.typ)
	start := e.clock.Now()
	defer func() {
		if p := recover(); p != nil {
			e.panics.Add(1)
			out = probe.Outcome{Result: probe.Unknown, Message: fmt.Sprintf("checker panicked: %v", p)}
			e.log.Error("checker panicked", "target", r.entry.name, "probe", r.typ.String(), "panic", p)
		}
		if out.Latency == 0 {
			out.Latency = e.clock.Since(start)
		}
		// Messages quote what probed servers said; the API carries them
		// in proto strings, which must be valid UTF-8, and bounded.
		out.Message = probe.BoundMessage(out.Message)
		e.obs.ProbeDone(ctx, r.entry.name, r.typ, out)
	}()
	out = checker.Check(ctx)
	if out.Result != probe.Success && timeout.Expired(ctx) {
		msg := fmt.Sprintf("probe timed out after %v", limit)
		if out.Message != "" {
			msg += ": " + out.Message
		}
		out = probe.Outcome{Result: probe.Failure, Message: msg, Latency: out.Latency, Phases: out.Phases}
	}
	return out
}

// applyLocked applies the outcome of a run of r of generation gen that
// started at start, unless the run is stale (the probe changed, was reset
// or stopped, the target is terminating or gone, or the engine is
// stopping). It returns the change submitted and the channel that
// receives once it is durable (nil, nil when nothing changed); en.mu held.
func (e *Engine) applyLocked(ctx context.Context, r *runner, gen uint64, start time.Time, out probe.Outcome) (*Change, <-chan error) {
	en := r.entry
	if ctx.Err() != nil || en.removed || r.retired || r.gen.Load() != gen || en.phase() != Active {
		return nil, nil
	}
	r.total++
	r.lastProbe, r.lastMessage, r.lastLatency = start, out.Message, out.Latency
	r.recent.add(out)
	return e.observeLocked(en, r, out)
}

// observeLocked feeds one outcome to r's state machine and submits what
// changed, returning the change and its channel (nil, nil if none); en.mu
// held.
func (e *Engine) observeLocked(en *entry, r *runner, out probe.Outcome) (*Change, <-chan error) {
	next, change := r.state.Observe(out.Result, *r.eff)
	r.state = next
	if !change.Transition && !change.Initialized {
		return nil, nil
	}
	now := e.clock.Now()
	ps := &en.editLocked().Probes[r.typ]
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
		if next.Result == probe.Unknown {
			ev.Consecutive = next.Unknowns
		}
		ps.LastTransitionTime = now
	}
	c := e.changeLocked(en, ev, false, now)
	r.unwritten.Add(1)
	e.exec.unwritten.Add(1)
	c.onWritten(func() {
		r.unwritten.Add(-1)
		e.exec.unwritten.Add(-1)
	})
	done, err := e.commits.submit([]*Change{c}, true)
	if err != nil {
		// Only when the engine is stopping: the state is not persisted and
		// will be recomputed by the probes after a restart.
		c.markWritten()
		e.log.Debug("transition not committed", "target", en.name, "err", err)
	}

	// Scheduling consequences.
	if change.Initialized && r.eff.InitialPeriod != r.eff.Period {
		e.scheduleFailed(e.exec.setPeriodLocked(r, r.eff.Period))
	}
	if r.typ == probe.Startup && next.Result == probe.Success {
		// Started: the startup probe is done; liveness and readiness start
		// at once (not a period later).
		e.exec.unscheduleLocked(r)
		e.scheduleFailed(e.startProbesLocked(en, now, false))
	}
	return c, done
}

// changeLocked builds the change publishing ev with en's current state;
// en.mu held. A change that makes the target ready for the first time
// since its creation or reset carries that, for Observer.Ready once the
// change is durable.
func (e *Engine) changeLocked(en *entry, ev Event, specChanged bool, now time.Time) *Change {
	t := &Target{Spec: en.spec, Status: en.currentLocked()}
	for typ, r := range en.runners {
		if r != nil {
			t.Status.Probes[typ].Effective = *r.eff // floors applied
		}
	}
	// Once t is committed the entry shares its status (one copy, not
	// two), unless it changed in between.
	en.built = t
	ev.Name, ev.Time, ev.Labels = en.name, now, en.spec.Labels
	ev.Started, ev.Ready, ev.Live = t.Status.Started(), t.Status.Ready(), t.Status.Live()
	if ev.Kind.Lifecycle() {
		ev.Target = t
	}
	c := &Change{Name: en.name, Target: t, SpecChanged: specChanged, Event: ev, entry: en}
	if ev.Ready && !en.wasReady {
		en.wasReady = true
		c.readyAfter, c.becameReady = now.Sub(en.startTime()), true
	}
	return c
}

// publishLocked sets the published result of r to `to` outside the state
// machine (a reset, a termination) and returns the transition that says
// so, or nil if the result was already `to`; en.mu held.
func (e *Engine) publishLocked(en *entry, r *runner, to probe.Result, message, reason string, now time.Time) *Change {
	from := r.state.Result
	if from == to {
		return nil
	}
	r.state.Result = to
	ps := &en.editLocked().Probes[r.typ]
	ps.Result, ps.LastTransitionTime = to, now
	return e.changeLocked(en, Event{Kind: KindTransition, Probe: r.typ, From: from, To: to, Message: message, Reason: reason}, false, now)
}
