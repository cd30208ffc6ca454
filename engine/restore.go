package engine

import (
	"github.com/probed/probed/engine/probe"
)

// restore rebuilds the runtime of a stored target (before Run): its spec,
// phase, published results and has_initialized come back; the runs of
// identical outcomes start over (they are not persisted), so a pending
// transition can be delayed by at most threshold × period, and none is
// invented.
func (e *Engine) restore(t *Target) {
	en := &entry{name: t.Spec.Name, spec: t.Spec, status: t.Status}
	en.wasReady = t.Status.Ready()
	en.mu.Lock()
	defer en.mu.Unlock()
	for _, typ := range probe.Types {
		p := t.Spec.Probe(typ)
		if p == nil {
			continue
		}
		r := e.newRunner(en, typ, p)
		// Published with the floors applied (t is not visible yet).
		t.Status.Probes[typ].Effective, en.status.Probes[typ].Effective = r.eff, r.eff
		ps := t.Status.Probes[typ]
		r.state = probe.State{Result: ps.Result, HasInitialized: ps.HasInitialized}
		en.runners[typ] = r
		c, err := e.opts.Checkers.Open(en.name, typ, p.Handler)
		if err != nil {
			// Never drop a stored target: it stays, and its probe fails
			// with the reason until the spec is fixed.
			e.log.Error("cannot probe restored target", "target", en.name, "probe", typ.String(), "err", err)
			c = refusedChecker{reason: err.Error()}
		}
		r.checker = c
	}
	e.warnFloored(en)
	e.targets[en.name] = en
	e.countOwnedLocked(t.Status.Owner, 1)
}

// startRestored schedules the restored targets (in Run, before anything
// else can change them): probes are spread over one period, terminating
// targets resume their drain where it was.
func (e *Engine) startRestored() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	for _, en := range e.targets {
		en.mu.Lock()
		if en.status.Phase == Terminating {
			e.scheduleDrainLocked(en, now)
		} else {
			e.startProbesLocked(en, now, true)
		}
		en.mu.Unlock()
	}
}
