package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/probed/probed/engine/probe"
)

// Probing ownership. Every registered target is known to the engine (its
// spec and published status, for Get, List and Watch); an owned one is
// also probed: it has runners (state machines, checkers, schedules) and
// the engine drives its drain. A single engine owns every target: Run owns
// the restored ones, Create owns what it creates. Several replicas share
// the targets by calling Own and Disown as they gain and lose them.

// Own makes this engine probe the named targets, as a new owner takes
// them over (after a restart, or from another replica): each starts from
// what is published — its spec, phase, published results and
// hasInitialized, so failureThreshold still applies to a probe that has
// passed — with its runs of identical outcomes at 0 (so a pending
// transition is delayed by at most threshold × period, and none is
// invented) and its first probes spread over one period. A terminating
// target resumes its drain where it was. Targets already owned are left
// as they are; unknown ones are ErrNotFound (the others are still taken).
// Own may be called before Run.
func (e *Engine) Own(ctx context.Context, names ...string) error {
	var errs []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		en, err := e.lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		e.ownEntry(en, true)
	}
	return errors.Join(errs...)
}

// ownEntry takes en over from its published state. With spread, probes
// whose first run has passed are spread over one period (a take-over);
// without, they run at once (a target just created).
func (e *Engine) ownEntry(en *entry, spread bool) {
	published, ok := e.feed.record(en.name)
	e.ownPublished(en, spread, published, ok)
}

// ownPublished is ownEntry with the published target (ok false: none)
// looked up by the caller.
func (e *Engine) ownPublished(en *entry, spread bool, published *record, ok bool) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.owned || en.removed {
		return
	}
	if ok {
		en.share(published)
	}
	en.wasReady = en.ready()
	for _, typ := range probe.Types {
		p := en.spec.Probe(typ)
		if p == nil {
			continue
		}
		r, err := e.newRunnerLocked(en, typ, p)
		if err != nil {
			// No wheel ID left: the target is reported, not probed.
			e.log.Error("cannot probe target", "target", en.name, "probe", typ.String(), "err", err)
			continue
		}
		result, initialized := en.probeState(typ)
		r.state = probe.State{Result: result, HasInitialized: initialized}
		c, err := e.opts.Checkers.Open(en.name, typ, p.Handler)
		if err != nil {
			// Never drop a stored target: it stays, and its probe fails
			// with the reason until the spec is fixed.
			e.log.Error("cannot probe target", "target", en.name, "probe", typ.String(), "err", err)
			c = refusedChecker{reason: err.Error()}
		}
		r.checker = c
	}
	e.warnFloored(en)
	en.owned = true
	now := e.clock.Now()
	if en.phase() == Terminating {
		e.scheduleDrainLocked(en, now)
		return
	}
	e.scheduleFailed(e.startProbesLocked(en, now, spread))
}

// Disown stops probing the named targets: their schedules and drains stop,
// runs in progress are cancelled, and Disown returns once none is in
// progress and every change this engine decided about them is durable
// and published — so a new owner that reads what is published (see Own)
// starts from everything this one knew. No run of these targets starts
// after it returns, until they are owned again. Targets not owned, or
// unknown, are ignored. On ctx's end it returns ctx's error; the probes
// are stopped regardless.
func (e *Engine) Disown(ctx context.Context, names ...string) error {
	var waits []<-chan runResult
	for _, name := range names {
		en, err := e.lookup(name)
		if err != nil {
			continue
		}
		en.mu.Lock()
		waits = e.disownLocked(en, waits)
		en.mu.Unlock()
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return e.commits.barrier(ctx)
}

// Drop stops probing the named targets at once, without waiting: their
// schedules and drains stop and runs in progress are cancelled (their
// outcomes dropped). For targets whose ownership is already lost (a
// cluster's shard key left the replica's lease), whose writes the store
// refuses anyway; it may be called from the store's Follow (it does not
// wait for the feed). Targets not owned, or unknown, are ignored.
func (e *Engine) Drop(names ...string) {
	for _, name := range names {
		en, err := e.lookup(name)
		if err != nil {
			continue
		}
		en.mu.Lock()
		e.disownLocked(en, nil)
		en.mu.Unlock()
	}
}

// Names returns the registered targets whose name match accepts (every
// one with a nil match), in no particular order: the cluster layer picks
// the targets of the shards it gains or loses with it.
func (e *Engine) Names(match func(name string) bool) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for name := range e.targets {
		if match == nil || match(name) {
			out = append(out, name)
		}
	}
	return out
}

// disownLocked stops every probe of en and its drain, and appends to
// waits a channel per run in progress that receives when it ends; en.mu
// held.
func (e *Engine) disownLocked(en *entry, waits []<-chan runResult) []<-chan runResult {
	for i, r := range en.runners {
		if r == nil {
			continue
		}
		if w := e.exec.retire(r); w != nil {
			waits = append(waits, w)
		}
		en.runners[i] = nil
	}
	if en.drain != nil {
		en.drain.Stop()
		en.drain = nil
	}
	en.owned = false
	return waits
}

// newRunnerLocked makes a runner for probe typ of en with its initial
// state, and gives it a wheel ID; en.mu held.
func (e *Engine) newRunnerLocked(en *entry, typ probe.Type, spec *probe.Spec) (*runner, error) {
	r := &runner{entry: en, typ: typ, spec: spec, eff: e.timing(spec), state: probe.Initial(typ)}
	if err := e.exec.alloc(r); err != nil {
		return nil, fmt.Errorf("target %q %s probe: %w", en.name, typ, err)
	}
	en.runners[typ] = r
	return r, nil
}

// restore registers a stored target, not owned yet (Open, before Run).
func (e *Engine) restore(r *record) {
	// Open: nothing reads the view yet, so r's client may still become
	// the registry's string of it.
	r.client = e.countClientLocked(r.client, 1)
	en := &entry{name: r.name(), client: r.client}
	en.share(r)
	e.targets[en.name] = en
}

// ownAll owns every registered target that is this engine's to probe
// (Run, before anything else can change them).
func (e *Engine) ownAll() {
	e.mu.Lock()
	entries := make([]*entry, 0, len(e.targets))
	for name, en := range e.targets {
		if e.owns(name) {
			entries = append(entries, en)
		}
	}
	e.mu.Unlock()
	// One pass over the view instead of a lookup by name per target (at
	// 100,000 targets the lookups took ~0.8 s of a restart).
	published := e.feed.byName()
	// Taken in hand on every CPU: opening a checker and scheduling a
	// probe is most of a restart's work once the store is loaded, and
	// targets share nothing but the executor's and the wheel's locks.
	workers := min(runtime.GOMAXPROCS(0), max(len(entries)/1000, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, en := range entries[w*len(entries)/workers : (w+1)*len(entries)/workers] {
				t, ok := published[en.name]
				e.ownPublished(en, true, t, ok)
			}
		})
	}
	wg.Wait()
}
