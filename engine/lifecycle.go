package engine

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// Create registers a target and starts probing it. It returns once the
// registration is durable, with the target as published. A target whose
// probes the engine could not schedule (every wheel ID taken) is refused
// with ErrResourceExhausted, never registered idle.
func (e *Engine) Create(ctx context.Context, spec *target.Spec) (*Target, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	if err := e.refuseUnwritable(); err != nil {
		return nil, err
	}
	if err := e.validate(spec, nil); err != nil {
		return nil, err
	}
	now := e.clock.Now()
	client := ClientFrom(ctx)
	if e.shared != nil {
		return e.createShared(ctx, spec, client, now)
	}
	created, done, err := e.createLocal(spec, client, "", now, e.commits)
	if err != nil {
		return nil, err
	}
	// Not wait(ctx, done): the change is submitted and will be committed
	// (or fail) whether the caller waits or not; giving up on it would
	// leave a stored target that nothing probes.
	return e.finishCreate(created, <-done)
}

// submitter queues changes: the committer, or an open group (group.go).
type submitter interface {
	submit(changes []*Change, wait bool) (<-chan error, error)
}

// createLocal registers a new target of owner (a set's name, "" for
// Create) over a store that is not shared and submits its creation to
// sub; finishCreate ends it once done says how the write went.
func (e *Engine) createLocal(spec *target.Spec, client, owner string, now time.Time, sub submitter) (*Change, <-chan error, error) {
	en := &entry{name: spec.Name, client: client, spec: spec, owned: true, status: &Status{Phase: Active, CreateTime: now, StartTime: now, Client: client, Owner: owner}}
	en.mu.Lock()
	if err := e.openRunnersLocked(en); err != nil {
		e.disownLocked(en, nil)
		en.mu.Unlock()
		return nil, nil, err
	}
	en.mu.Unlock()

	e.mu.Lock()
	if err := e.checkLimitsLocked(spec.Name, client); err != nil {
		e.mu.Unlock()
		e.discard(en)
		return nil, nil, err
	}
	e.targets[spec.Name] = en
	// en is not visible before e.mu is released.
	en.client = e.countClientLocked(client, 1)
	en.status.Client = en.client
	en.mu.Lock() // held until the change is queued, so nothing about en is queued before it
	e.mu.Unlock()
	created := e.changeLocked(en, Event{Kind: KindCreated}, true, now)
	done, err := sub.submit([]*Change{created}, true)
	en.mu.Unlock()
	if err != nil {
		e.unregister(en)
		return nil, nil, err
	}
	return created, done, nil
}

// finishCreate starts probing the target of createLocal's change once
// written (err nil), or forgets it.
func (e *Engine) finishCreate(created *Change, err error) (*Target, error) {
	en := created.entry
	if err != nil {
		e.unregister(en)
		return nil, err
	}
	en.mu.Lock()
	e.scheduleFailed(e.startProbesLocked(en, e.clock.Now(), false))
	en.mu.Unlock()
	return e.withLive(created.Target), nil
}

// unregister forgets a target whose creation failed.
func (e *Engine) unregister(en *entry) {
	e.mu.Lock()
	if e.targets[en.name] == en {
		delete(e.targets, en.name)
		e.countClientLocked(en.client, -1)
	}
	e.mu.Unlock()
	e.discard(en)
}

// createShared is Create over a SharedStore: the store decides whether the
// target exists (the create is a conditional write), and the target
// becomes known here — and probed, by whichever replica owns it — when the
// view follows the write. It returns once that has happened here.
//
// Creates of one name on this replica go one at a time: a second waits
// for the first, then finds the target (AlreadyExists) or, when the first
// failed, tries itself. (Two creates of a name in one batch would both be
// refused: the store answers by name.)
func (e *Engine) createShared(ctx context.Context, spec *target.Spec, client string, now time.Time) (*Target, error) {
	finish, err := e.startCreates(ctx, []string{spec.Name}, client, func() error {
		return e.checkLimitsLocked(spec.Name, client)
	})
	if err != nil {
		return nil, err
	}
	defer finish()
	created := e.sharedCreation(spec, client, "", now)
	done, err := e.commits.submit([]*Change{created}, true)
	if err == nil {
		err = <-done // see Create: the caller giving up does not undo it
	}
	if err != nil {
		return nil, err
	}
	return e.withLive(created.Target), nil
}

// sharedCreation is the change that creates a target of owner (a set's
// name, "" for Create) over a SharedStore: the store refuses it when the
// target exists.
func (e *Engine) sharedCreation(spec *target.Spec, client, owner string, now time.Time) *Change {
	status := Status{Phase: Active, CreateTime: now, StartTime: now, Client: client, Owner: owner}
	for _, t := range probe.Types {
		if spec.Probe(t) != nil {
			status.Probes[t] = ProbeStatus{Present: true, Result: probe.Initial(t).Result}
		}
	}
	en := &entry{name: spec.Name, client: client, spec: spec, status: &status}
	created := e.changeLocked(en, Event{Kind: KindCreated}, true, now)
	created.Create = true
	return created
}

// checkLimitsLocked refuses a create that the registry says exists or
// that would pass --max-targets or --max-targets-per-client; e.mu held.
// Over a SharedStore the registry lags the store by a few milliseconds,
// and the store decides existence; the limits count the creates in flight
// here (inflight.go).
func (e *Engine) checkLimitsLocked(name, client string) error {
	if _, ok := e.targets[name]; ok {
		return fmt.Errorf("target %q: %w", name, ErrAlreadyExists)
	}
	return e.checkRoomLocked(client, 1)
}

// checkRoomLocked refuses n more targets of client when they would pass
// --max-targets or --max-targets-per-client, counting the registry and
// the creates in flight here; e.mu held.
func (e *Engine) checkRoomLocked(client string, n int) error {
	total, mine := e.inFlightLocked(client)
	if e.opts.MaxTargets > 0 && len(e.targets)+total+n > e.opts.MaxTargets {
		return fmt.Errorf("at most %d targets (--max-targets): %w", e.opts.MaxTargets, ErrResourceExhausted)
	}
	if limit := e.opts.MaxTargetsPerClient; limit > 0 && client != "" && e.perClient[client]+mine+n > limit {
		return fmt.Errorf("%q already has %d targets, the most one client may have (--max-targets-per-client): %w", client, limit, ErrResourceExhausted)
	}
	return nil
}

// openRunnersLocked creates a runner (with its wheel ID and its checker)
// for every probe of en.spec; en.mu held. On error the runners made so
// far stay in en.runners (discard them).
func (e *Engine) openRunnersLocked(en *entry) error {
	for _, t := range probe.Types {
		p := en.spec.Probe(t)
		if p == nil {
			continue
		}
		r, err := e.newRunnerLocked(en, t, p)
		if err != nil {
			return err
		}
		en.edit().Probes[t] = ProbeStatus{Present: true, Result: r.state.Result}
		c, err := e.opts.Checkers.Open(en.name, t, p.Handler)
		if err != nil {
			return fmt.Errorf("target %q %s probe: %w: %w", en.name, t, ErrInvalid, err)
		}
		r.checker = c
	}
	return nil
}

// validate runs the target's validation (ratcheting against old on an
// update) and the server's extra admission checks.
func (e *Engine) validate(spec, old *target.Spec) error {
	return e.validateList(spec, old).Err()
}

// validateList is validate's list of problems. A valid spec's labels
// become those of a published target with the same labels, when one is
// found (feed.sharedLabels): equal label sets are held once.
func (e *Engine) validateList(spec, old *target.Spec) field.List {
	errs := target.Validate(spec, old, e.targetOptions())
	if e.opts.Admit != nil {
		errs = append(errs, e.opts.Admit(spec)...)
	}
	if len(errs) == 0 {
		spec.Labels = e.feed.sharedLabels(spec.Labels)
	}
	return errs
}

// acquire waits until Run has started, finds a target this engine owns
// and returns it with its lock held (the caller unlocks); a removed target
// is not found (once vouched for: absence.go), one another replica owns
// is a *NotOwnedError.
func (e *Engine) acquire(ctx context.Context, name string) (*entry, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	for synced := false; ; synced = true {
		en, err := e.lookup(name)
		if err == nil {
			en.mu.Lock()
			switch {
			case en.removed:
				en.mu.Unlock()
				err = notFound(name)
			case !en.owned:
				en.mu.Unlock()
				return nil, &NotOwnedError{Name: name}
			default:
				return en, nil
			}
		}
		if synced {
			return nil, err
		}
		if again, err := e.vouchAbsence(ctx, name, err); !again {
			return nil, err
		}
	}
}

// acquireWritable is acquire for a call that changes the target: refused
// (an error wrapping ErrUnavailable) while the store cannot write.
func (e *Engine) acquireWritable(ctx context.Context, name string) (*entry, error) {
	en, err := e.acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := e.refuseUnwritable(); err != nil {
		en.mu.Unlock()
		return nil, err
	}
	return en, nil
}

func errTerminating(name string) error {
	return fmt.Errorf("target %q is terminating: %w", name, ErrFailedPrecondition)
}

// discard releases a target that never got published.
func (e *Engine) discard(en *entry) {
	en.mu.Lock()
	defer en.mu.Unlock()
	e.disownLocked(en, nil)
	en.removed = true
}

func wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lookup returns the live entry of a target.
func (e *Engine) lookup(name string) (*entry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.targets[name]
	if !ok {
		return nil, notFound(name)
	}
	return en, nil
}

// Get returns a target as last published, with the live probe figures
// (counters, last probe) filled in.
func (e *Engine) Get(ctx context.Context, name string) (*Target, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	if err := e.feed.vouched(); err != nil {
		return nil, err
	}
	t, ok := e.feed.get(name)
	if !ok {
		again, err := e.vouchAbsence(ctx, name, notFound(name))
		if !again {
			return nil, err
		}
		if t, ok = e.feed.get(name); !ok {
			return nil, notFound(name)
		}
	}
	e.addLive(t) // t is made for this call
	return t, nil
}

// ListOptions page through targets.
type ListOptions struct {
	// After: only targets whose name sorts after it (the last name of the
	// previous page).
	After    string
	Limit    int
	Selector map[string]string
	// Namespace, when set: only targets named "Namespace/...".
	Namespace string
	// Visible, when set: only targets it returns true for (the caller's
	// read permission); called with the feed's lock held.
	Visible func(name string) bool
}

// List returns published targets in name order and whether more follow.
func (e *Engine) List(ctx context.Context, o ListOptions) ([]*Target, bool, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, false, err
	}
	if err := e.feed.vouched(); err != nil {
		return nil, false, err
	}
	ts, more := e.feed.list(o)
	for _, t := range ts {
		e.addLive(t) // made for this call
	}
	return ts, more, nil
}

// withLive copies a published target and adds the figures kept in memory.
func (e *Engine) withLive(t *Target) *Target {
	out := *t
	e.addLive(&out)
	return &out
}

// addLive adds to t, a target of the caller's, the effective timings and
// the figures kept in memory.
func (e *Engine) addLive(out *Target) {
	for _, typ := range probe.Types {
		if p := out.Spec.Probe(typ); p != nil {
			out.Status.Probes[typ].Effective = e.effective(p)
		}
	}
	e.mu.Lock()
	en := e.targets[out.Spec.Name]
	e.mu.Unlock()
	if en == nil {
		return
	}
	en.mu.Lock()
	defer en.mu.Unlock()
	for typ, r := range en.runners {
		if r == nil || r.spec != out.Spec.Probe(probe.Type(typ)) {
			continue
		}
		ps := &out.Status.Probes[typ]
		r.figures(ps)
		ps.Recent = r.recent.samples()
	}
}

// Update replaces the spec of an existing target in place. Probes that
// still exist keep their state (published result, counters,
// has_initialized); a changed handler gets a new checker; a changed period
// is rescheduled from now; added probes start from their initial state; a
// startup probe added to a target that has already started counts as
// passed (the start it guards is over).
func (e *Engine) Update(ctx context.Context, spec *target.Spec) (*Target, error) {
	updated, done, err := e.update(ctx, spec, e.commits)
	return e.settle(ctx, done, err, updated)
}

// update is Update submitting to sub; settle ends it.
func (e *Engine) update(ctx context.Context, spec *target.Spec, sub submitter) (*Change, <-chan error, error) {
	en, err := e.acquireWritable(ctx, spec.Name)
	if err != nil {
		return nil, nil, err
	}
	if en.phase() == Terminating {
		en.mu.Unlock()
		return nil, nil, errTerminating(spec.Name)
	}
	if err := e.validate(spec, en.spec); err != nil {
		en.mu.Unlock()
		return nil, nil, err
	}
	// Prepare first — the checkers of new handlers, the runners (wheel
	// IDs) of added probes — so that a failure leaves the target untouched.
	checkers := make(map[probe.Type]Checker)
	added := make(map[probe.Type]*runner)
	undo := func() {
		for _, c := range checkers {
			c.Close()
		}
		for _, r := range added {
			e.exec.retire(r)
		}
	}
	for _, t := range probe.Types {
		p, r := spec.Probe(t), en.runners[t]
		if p == nil || (r != nil && reflect.DeepEqual(r.spec.Handler, p.Handler)) {
			continue
		}
		if r == nil {
			nr := &runner{entry: en, typ: t, spec: p, eff: e.timing(p), state: probe.Initial(t)}
			if err := e.exec.alloc(nr); err != nil {
				undo()
				en.mu.Unlock()
				return nil, nil, fmt.Errorf("target %q %s probe: %w", en.name, t, err)
			}
			added[t] = nr
		}
		c, err := e.opts.Checkers.Open(en.name, t, p.Handler)
		if err != nil {
			undo()
			en.mu.Unlock()
			return nil, nil, fmt.Errorf("target %q %s probe: %w: %w", en.name, t, ErrInvalid, err)
		}
		checkers[t] = c
	}
	now := e.clock.Now()
	wasStarted := en.started()
	en.spec = spec
	for _, t := range probe.Types {
		p, r := spec.Probe(t), en.runners[t]
		switch {
		case p == nil && r == nil:
		case p == nil: // removed
			e.exec.retire(r)
			en.runners[t] = nil
			en.edit().Probes[t] = ProbeStatus{}
		case r == nil: // added
			r = added[t]
			r.checker = checkers[t]
			en.runners[t] = r
			if t == probe.Startup && wasStarted {
				r.state = probe.State{Result: probe.Success, HasInitialized: true}
			}
			en.edit().Probes[t] = ProbeStatus{Present: true, Result: r.state.Result, HasInitialized: r.state.HasInitialized}
		default: // kept
			if c, ok := checkers[t]; ok {
				r.replaceChecker(c)
				e.exec.interrupt(r) // a run of the old handler says nothing about the new one
			}
			old := r.period()
			r.spec, r.eff = p, e.timing(p)
			if r.period() != old {
				e.scheduleFailed(e.exec.reschedule(r, now.Add(r.period()), r.period()))
			}
		}
	}
	e.scheduleFailed(e.startProbesLocked(en, now, false))
	updated := e.changeLocked(en, Event{Kind: KindUpdated, Reason: ReasonUpdated}, true, now)
	done, err := sub.submit([]*Change{updated}, true)
	en.mu.Unlock()
	return updated, done, err
}

// Reset tells the engine the target restarted: every probe returns to its
// initial state (has_initialized false), published results that change
// are transitions with reason Reset, and probing starts over from now (the
// startup probe first).
func (e *Engine) Reset(ctx context.Context, name string) (*Target, error) {
	en, err := e.acquireWritable(ctx, name)
	if err != nil {
		return nil, err
	}
	if en.phase() == Terminating {
		en.mu.Unlock()
		return nil, errTerminating(name)
	}
	now := e.clock.Now()
	var changes []*Change
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		e.exec.unschedule(r)
		e.exec.interrupt(r)
		// Back to the initial state: no run, not initialized, and the
		// initial result (a transition if it differs).
		r.state = probe.State{Result: r.state.Result}
		en.edit().Probes[r.typ].HasInitialized = false
		if c := e.publishLocked(en, r, probe.Initial(r.typ).Result, "target reset", ReasonReset, now); c != nil {
			changes = append(changes, c)
		}
	}
	en.edit().StartTime = now
	en.wasReady = false
	reset := e.changeLocked(en, Event{Kind: KindReset, Reason: ReasonReset}, false, now)
	changes = append(changes, reset)
	e.scheduleFailed(e.startProbesLocked(en, now, false))
	done, err := e.commits.submit(changes, true)
	en.mu.Unlock()
	return e.settle(ctx, done, err, reset)
}

// Delete starts a graceful removal: the target becomes TERMINATING,
// readiness is published as FAILURE at once (reason Terminating), every
// probe stops, and the preStop sleep (bounded by the termination grace
// period; none or 0 means at once) runs on the timer wheel, after which the
// target is removed with a DELETED event. It returns once TERMINATING is
// durable. Deleting a terminating target changes nothing, unless
// WithGracePeriod shortens its drain.
func (e *Engine) Delete(ctx context.Context, name string, opts ...DeleteOption) (*Target, error) {
	o := deleteOptionsOf(opts)
	en, err := e.acquireWritable(ctx, name)
	if err != nil {
		return nil, err
	}
	if en.phase() == Terminating {
		if o.grace != nil {
			return e.shortenGrace(ctx, en, *o.grace) // unlocks en
		}
		en.mu.Unlock()
		return e.Get(ctx, name) // a no-op; NotFound if it is gone already
	}
	terminating, done, err := e.terminateLocked(en, o, e.commits) // unlocks en
	return e.settle(ctx, done, err, terminating)
}

// terminateLocked starts the removal of en (active, owned, locked) and
// submits it to sub; it unlocks en. settle ends it.
func (e *Engine) terminateLocked(en *entry, o deleteOptions, sub submitter) (*Change, <-chan error, error) {
	now := e.clock.Now()
	st := en.edit()
	st.Phase, st.DeleteTime, st.DeletionGracePeriod = Terminating, now, o.grace
	var changes []*Change
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		e.exec.unschedule(r)
		e.exec.interrupt(r)
		if r.typ == probe.Readiness {
			if c := e.publishLocked(en, r, probe.Failure, "target is terminating", ReasonTerminating, now); c != nil {
				changes = append(changes, c)
			}
		}
	}
	terminating := e.changeLocked(en, Event{Kind: KindTerminating, Reason: ReasonTerminating}, false, now)
	changes = append(changes, terminating)
	done, err := sub.submit(changes, true)
	if err == nil {
		e.scheduleDrainLocked(en, now)
	}
	en.mu.Unlock()
	return terminating, done, err
}

// settle waits for a submitted change and returns the target as that
// change left it (not as it may be by the time the caller reads it: a
// target without a preStop sleep can be gone already).
func (e *Engine) settle(ctx context.Context, done <-chan error, err error, c *Change) (*Target, error) {
	if err == nil {
		err = wait(ctx, done)
	}
	if err != nil {
		return nil, err
	}
	return e.withLive(c.Target), nil
}
