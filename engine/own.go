package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/probed/probed/engine/probe"
)

// Probing ownership. Every registered target is known to the engine (its
// spec and published status, for Get, List and Watch); an owned one is
// also probed: it has runners (state machines, checkers, schedules) and
// the engine drives its drain.
//
// Which targets the engine owns is the store's to say, in its ordered
// log: Load gives the ownership at the store's revision
// (Stored.Ownership), Follow again wherever it changes (Delivery.Owned) —
// every target over a store with one writer; over etcd, the shards whose
// owner keys the replica's lease holds, from the revision of their claim
// to that of their release or loss. The follow loop applies each
// delivery's registry changes and then its ownership under one lock
// (Engine.own), in revision order, in one place (apply): a target is
// probed exactly when its shard is owned and not being released, whatever
// order a create and a claim, a loss or a release come in. The one
// imperative change is a release (Release), which a replica announces
// before it gives its shards up, under the same lock: from then on their
// targets are not probed here, whatever the log brings, until the log
// shows the shards leaving (their keys deleted) or Keep takes them back.

// ownsLocked reports whether this engine is to probe the named target:
// its shard is owned and not being released; e.own held.
func (e *Engine) ownsLocked(name string) bool {
	s := e.owned.shard(name)
	return e.owned.owns(s) && !e.releasing[s]
}

// apply applies one delivery of the store's log, in one place, under one
// lock (own): its changes to the registry (a target created anywhere is
// registered, one deleted anywhere is forgotten), then to the feed
// (published: a client that sees a DELETED finds the name free, one that
// sees a CREATED finds the target registered), then its ownership. The
// targets the engine is to probe from this position on — those it
// created owned, those of shards it gained — are taken last, once the
// view is at the position: a new owner starts from everything up to the
// claim, and probes nothing before its view holds it.
func (e *Engine) apply(d Delivery) {
	e.own.Lock()
	defer e.own.Unlock()
	var created []*entry
	for _, c := range d.Changes {
		if en := e.applyChangeLocked(c); en != nil {
			created = append(created, en)
		}
	}
	if len(d.Changes) > 0 {
		// Durable: a probe held behind its unwritten transition is free
		// to run once anyone can see the transition.
		for _, c := range d.Changes {
			c.markWritten()
		}
		e.feed.publish(d.Changes)
	}
	for _, en := range created {
		if e.ownsLocked(en.name) {
			// Just created: its probes start now.
			e.take(en, false, en.rec)
		}
	}
	if d.Owned != nil {
		e.reownLocked(d.Owned)
	}
	// The position is reached once all of it is applied, ownership
	// included: Sync(d.Pos) returning means a call may find the targets
	// of a shard gained at d.Pos owned here (the server runs a call
	// whose shard this replica just claimed once Sync returns).
	e.feed.reach(d.Pos)
}

// applyChangeLocked applies one change to the registry and returns the
// entry it registered, if any; e.own held. Changes of targets this engine
// owns are its own (only the owner writes a target after its creation):
// its entry is ahead of them already.
func (e *Engine) applyChangeLocked(c *Change) (created *entry) {
	e.mu.Lock()
	en := e.targets[c.Name]
	switch {
	case c.Delete:
		if en != nil {
			delete(e.targets, c.Name)
			e.countClientLocked(en.client, -1)
		}
		e.mu.Unlock()
		if en != nil {
			en.mu.Lock()
			e.disownLocked(en, nil)
			en.removed = true
			en.mu.Unlock()
		}
	case en == nil && c.Target != nil:
		// Not published yet: r's client may still become the registry's
		// string of it (one per client identity, not one per target).
		r := c.record()
		r.client = e.countClientLocked(r.client, 1)
		en = &entry{name: c.Name, client: r.client, shard: e.owned.shard(c.Name)}
		en.shareLocked(r)
		e.targets[c.Name] = en
		e.mu.Unlock()
		if c.Event.Kind == KindCreated {
			return en
		}
		// A target the view did not have (a change of one created
		// before a reload's gap): taken as a new owner takes it.
		if e.ownsLocked(c.Name) {
			e.take(en, true, r)
		}
	default:
		e.mu.Unlock()
		if en != nil && c.Target != nil {
			en.mu.Lock()
			if !en.owned {
				en.shareLocked(c.record())
			}
			en.mu.Unlock()
		}
	}
	return nil
}

// reownLocked makes o the engine's ownership: the targets of shards it
// gained (not being released) are taken over from what is published,
// those of shards it lost are dropped at once, without waiting (their
// writes are fenced off already), and a release of a shard that left ends
// (its key is gone: a later claim is a gain); e.own held.
func (e *Engine) reownLocked(o *Ownership) {
	old := e.owned
	e.owned = o
	if len(e.releasing) != len(o.Owned) {
		e.releasing = append(e.releasing[:0:0], make([]bool, len(o.Owned))...)
	}
	resharded := len(old.Owned) != len(o.Owned)
	changed := make([]bool, len(o.Owned))
	some := resharded
	for s := range o.Owned {
		before := old.owns(s) && !e.releasing[s]
		if old.owns(s) && !o.Owned[s] {
			e.releasing[s] = false // the log shows it leaving
		}
		if after := o.Owned[s] && !e.releasing[s]; after != before {
			changed[s], some = true, true
		}
	}
	if !some {
		return
	}
	e.reconcileLocked(func(en *entry) bool {
		if resharded {
			en.shard = o.shard(en.name)
			return true
		}
		return changed[en.shard]
	})
}

// reconcileLocked takes or drops the registered targets in (every one
// with a nil in) so that exactly those ownsLocked accepts are probed;
// e.own held.
func (e *Engine) reconcileLocked(in func(en *entry) bool) {
	e.mu.Lock()
	var entries []*entry
	for _, en := range e.targets {
		if in == nil || in(en) {
			entries = append(entries, en)
		}
	}
	e.mu.Unlock()
	var taken []*entry
	for _, en := range entries {
		if e.ownsLocked(en.name) {
			taken = append(taken, en)
			continue
		}
		en.mu.Lock()
		e.disownLocked(en, nil)
		en.mu.Unlock()
	}
	published := e.published(taken)
	for _, en := range taken {
		e.take(en, true, published(en))
	}
}

// published returns the function that gives the published record of
// each of entries: the feed's, or the entry's own when it is newer (the
// follow loop shares a record with the entries it does not own before it
// publishes it). Many entries are looked up in one pass over the view.
func (e *Engine) published(entries []*entry) func(en *entry) *record {
	var byName map[string]*record
	if len(entries) > 64 {
		byName = e.feed.byName()
	}
	return func(en *entry) *record {
		var r *record
		var ok bool
		if byName != nil {
			r, ok = byName[en.name]
		} else {
			r, ok = e.feed.record(en.name)
		}
		en.mu.Lock()
		defer en.mu.Unlock()
		if !ok || en.rec.rev > r.rev {
			return en.rec
		}
		return r
	}
}

// take makes this engine probe en, as a new owner takes it over (after a
// restart, or from another replica): from what is published — its spec,
// phase, published results and hasInitialized, so failureThreshold still
// applies to a probe that has passed — with its runs of identical
// outcomes at 0 (so a pending transition is delayed by at most threshold
// × period, and none is invented). With spread, probes whose first run
// has passed are spread over one period (a take-over); without, they run
// at once (a target just created). A terminating target resumes its
// drain where it was. An owned or removed target is left as it is.
//
// published is what is published of en (Engine.published).
func (e *Engine) take(en *entry, spread bool, published *record) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.owned || en.removed {
		return
	}
	en.shareLocked(published)
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
	e.warnFlooredLocked(en)
	en.owned = true
	now := e.clock.Now()
	if en.phase() == Terminating {
		e.scheduleDrainLocked(en, now)
		return
	}
	e.scheduleFailed(e.startProbesLocked(en, now, spread))
}

// Release stops probing the targets of shards, as a replica does before
// it gives them up (it deletes their owner keys once Release returned):
// it announces the release — from now on no target of these shards is
// probed here, whatever the store's log brings meanwhile (a target
// created in them is registered, not probed), until the log shows a
// shard leaving this engine or Keep takes it back —, stops their
// schedules and drains, cancels their runs in progress (their outcomes
// are dropped), and returns once none is in progress and every change
// this engine decided about them is durable and published: a new owner,
// which starts from what is published, starts from everything this one
// knew. On ctx's end it returns ctx's error; the probes are stopped
// regardless. Shards the log does not show owned (not claimed yet, or
// gone already) are left alone: there is nothing of them to release, and
// a mark on them would outlive the shard (the caller releases only what
// the log brought it).
func (e *Engine) Release(ctx context.Context, shards []int) error {
	if err := e.awaitRunning(ctx); err != nil {
		return err
	}
	e.own.Lock()
	release := make([]bool, len(e.releasing))
	for _, s := range shards {
		if e.owned.owns(s) {
			e.releasing[s], release[s] = true, true
		}
	}
	e.mu.Lock()
	var entries []*entry
	for _, en := range e.targets {
		if release[en.shard] {
			entries = append(entries, en)
		}
	}
	e.mu.Unlock()
	var waits []<-chan runResult
	for _, en := range entries {
		en.mu.Lock()
		waits = e.disownLocked(en, waits)
		en.mu.Unlock()
	}
	e.own.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return e.commits.barrier(ctx)
}

// Keep ends a Release of shards that this replica holds after all (their
// owner keys could not be deleted, and it is to own them again): the
// targets of those the log shows owned are probed again, from what is
// published.
func (e *Engine) Keep(shards []int) {
	e.own.Lock()
	defer e.own.Unlock()
	kept := make([]bool, len(e.releasing))
	for _, s := range shards {
		if s >= 0 && s < len(e.releasing) && e.releasing[s] {
			e.releasing[s], kept[s] = false, true
		}
	}
	e.reconcileLocked(func(en *entry) bool { return kept[en.shard] })
}

// Names returns the registered targets whose name match accepts (every
// one with a nil match), in no particular order.
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
		if w := e.exec.retireLocked(r); w != nil {
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
	en := &entry{name: r.name(), client: r.client, shard: e.owned.shard(r.name())}
	en.shareLocked(r)
	e.targets[en.name] = en
}

// ownAll takes every restored target the store says is this engine's
// (Run, before the follow loop applies anything).
func (e *Engine) ownAll() {
	e.own.Lock()
	defer e.own.Unlock()
	e.mu.Lock()
	entries := make([]*entry, 0, len(e.targets))
	for name, en := range e.targets {
		if e.ownsLocked(name) {
			entries = append(entries, en)
		}
	}
	e.mu.Unlock()
	// Taken in hand on every CPU: opening a checker and scheduling a
	// probe is most of a restart's work once the store is loaded, and
	// targets share nothing but the executor's and the wheel's locks.
	// What they are taken from is what Open restored: their records.
	workers := min(runtime.GOMAXPROCS(0), max(len(entries)/1000, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, en := range entries[w*len(entries)/workers : (w+1)*len(entries)/workers] {
				e.take(en, true, en.rec)
			}
		})
	}
	wg.Wait()
}
