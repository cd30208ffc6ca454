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
// registration is durable and the engine's view holds it, with the target
// as published. A target whose probes the engine could not schedule
// (every wheel ID taken) is refused with ErrResourceExhausted, never
// registered idle; so is one whose checker cannot be opened, with
// ErrInvalid.
//
// The store decides whether the target exists (over a SharedStore the
// create is a conditional write; over a store with one writer the engine
// alone creates), and the target becomes known here — and probed, when
// this engine owns it — when the store's log delivers the write, as a
// target another replica created does (follow.go). Creates of one name on
// this engine go one at a time: a second waits for the first, then finds
// the target (AlreadyExists) or, when the first failed, tries itself.
// (Two creates of a name in one batch would both be refused: a
// SharedStore answers by name.)
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
	if err := e.checkProbes(spec); err != nil {
		return nil, err
	}
	client := ClientFrom(ctx)
	finish, err := e.startCreates(ctx, []string{spec.Name}, client, func() error {
		return e.checkLimitsLocked(spec.Name, client)
	})
	if err != nil {
		return nil, err
	}
	defer finish()
	created := e.creation(spec, client, "", e.clock.Now())
	done, err := e.commits.submit([]*Change{created}, true)
	if err == nil {
		// Not wait(ctx, done): the change is submitted and will be
		// committed (or fail) whether the caller waits or not, and the
		// limits count it as in flight until it is.
		err = <-done
	}
	if err != nil {
		return nil, err
	}
	return e.withLive(created.Target), nil
}

// submitter queues changes: the committer, or an open group (group.go).
type submitter interface {
	submit(changes []*Change, wait bool) (<-chan error, error)
}

// creation is the change that creates a target of owner (a set's name, ""
// for Create): it registers nothing (the follow loop registers the target
// when the store delivers it), and a SharedStore refuses it when the
// target exists.
func (e *Engine) creation(spec *target.Spec, client, owner string, now time.Time) *Change {
	status := Status{Phase: Active, CreateTime: now, StartTime: now, Client: client, Owner: owner}
	for _, t := range probe.Types {
		if spec.Probe(t) != nil {
			status.Probes[t] = ProbeStatus{Present: true, Result: probe.Initial(t).Result}
		}
	}
	en := &entry{name: spec.Name, client: client, spec: spec, status: &status}
	created := e.changeLocked(en, Event{Kind: KindCreated}, true, now)
	created.Create, created.entry = true, nil
	return created
}

// checkProbes refuses a target whose probes this engine could not run:
// a checker that cannot be opened (ErrInvalid), or more probes than the
// timer wheel has room for now (ErrResourceExhausted). The owner opens
// its own checkers when the store delivers the create; the room is not
// reserved (concurrent creates may still take it: the owner then reports
// the target without probing it, and logs why).
func (e *Engine) checkProbes(spec *target.Spec) error {
	n := 0
	for _, t := range probe.Types {
		p := spec.Probe(t)
		if p == nil {
			continue
		}
		n++
		c, err := e.opts.Checkers.Open(spec.Name, t, p.Handler)
		if err != nil {
			return fmt.Errorf("target %q %s probe: %w: %w", spec.Name, t, ErrInvalid, err)
		}
		c.Close()
	}
	return e.exec.room(n)
}

// checkLimitsLocked refuses a create that the registry says exists or
// that would pass --max-targets or --max-targets-per-client; e.mu held.
// The registry follows the store's log: over a SharedStore it lags the
// store by a few milliseconds, and the store decides existence; the
// limits count the creates in flight here (inflight.go).
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
	if err := e.vouchView(); err != nil {
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

// getOwned returns a target this engine owns (it just acquired it) as last
// published, with its live figures: the owner's view of its own targets
// needs no vouching, since only the owner writes a target after its
// creation. NotFound if it is gone meanwhile, ErrClosed once the engine
// has stopped.
func (e *Engine) getOwned(ctx context.Context, name string) (*Target, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	t, ok := e.feed.get(name)
	if !ok {
		return nil, notFound(name)
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
	// WithoutRecent leaves out each probe status's Recent runs (a slice
	// per probe and target) for a caller that does not show them.
	WithoutRecent bool
}

// List returns published targets in name order and whether more follow.
func (e *Engine) List(ctx context.Context, o ListOptions) ([]*Target, bool, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, false, err
	}
	if err := e.vouchView(); err != nil {
		return nil, false, err
	}
	ts, more := e.feed.list(o)
	for _, t := range ts {
		e.addLiveRecent(t, !o.WithoutRecent) // made for this call
	}
	return ts, more, nil
}

// ListEach calls fn with each target of the page List would return, in
// name order, and returns whether more follow. The Target fn receives is
// valid only during the call (the next target reuses it): fn copies what
// it keeps (its Spec, which is shared and never modified, it may keep).
// For a caller that converts the page, it is List without a Target per
// target.
func (e *Engine) ListEach(ctx context.Context, o ListOptions, fn func(*Target)) (bool, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return false, err
	}
	if err := e.vouchView(); err != nil {
		return false, err
	}
	records, more := e.feed.listRecords(o)
	var t Target
	for _, r := range records {
		r.fill(&t, e.feed.effective)
		e.addLiveRecent(&t, !o.WithoutRecent)
		fn(&t)
	}
	return more, nil
}

// withLive copies a published target and adds the figures kept in memory.
func (e *Engine) withLive(t *Target) *Target {
	out := *t
	e.addLive(&out)
	return &out
}

// addLive adds to t, a target of the caller's, the effective timings
// (unless set) and the figures kept in memory.
func (e *Engine) addLive(out *Target) { e.addLiveRecent(out, true) }

// addLiveRecent is addLive, with each probe's Recent runs only when
// recent is set.
func (e *Engine) addLiveRecent(out *Target, recent bool) {
	for _, typ := range probe.Types {
		if p := out.Spec.Probe(typ); p != nil && out.Status.Probes[typ].Effective == (probe.Effective{}) {
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
		if recent {
			ps.Recent = r.recent.samples()
		}
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
			e.exec.retireLocked(r)
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
			e.exec.retireLocked(r)
			en.runners[t] = nil
			en.editLocked().Probes[t] = ProbeStatus{}
		case r == nil: // added
			r = added[t]
			r.checker = checkers[t]
			en.runners[t] = r
			if t == probe.Startup && wasStarted {
				r.state = probe.State{Result: probe.Success, HasInitialized: true}
			}
			en.editLocked().Probes[t] = ProbeStatus{Present: true, Result: r.state.Result, HasInitialized: r.state.HasInitialized}
		default: // kept
			if c, ok := checkers[t]; ok {
				r.replaceCheckerLocked(c)
				e.exec.interruptLocked(r) // a run of the old handler says nothing about the new one
			}
			old := r.period()
			r.spec, r.eff = p, e.timing(p)
			if r.period() != old {
				e.scheduleFailed(e.exec.rescheduleLocked(r, now.Add(r.period()), r.period()))
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
		e.exec.unscheduleLocked(r)
		e.exec.interruptLocked(r)
		// Back to the initial state: no run, not initialized, and the
		// initial result (a transition if it differs).
		r.state = probe.State{Result: r.state.Result}
		en.editLocked().Probes[r.typ].HasInitialized = false
		if c := e.publishLocked(en, r, probe.Initial(r.typ).Result, "target reset", ReasonReset, now); c != nil {
			changes = append(changes, c)
		}
	}
	en.editLocked().StartTime = now
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
			return e.shortenGraceLocked(ctx, en, *o.grace) // unlocks en
		}
		en.mu.Unlock()
		return e.getOwned(ctx, name) // a no-op; NotFound if it is gone already
	}
	terminating, done, err := e.terminateLocked(en, o, e.commits) // unlocks en
	return e.settle(ctx, done, err, terminating)
}

// terminateLocked starts the removal of en (active, owned, locked) and
// submits it to sub; it unlocks en. settle ends it.
func (e *Engine) terminateLocked(en *entry, o deleteOptions, sub submitter) (*Change, <-chan error, error) {
	now := e.clock.Now()
	st := en.editLocked()
	st.Phase, st.DeleteTime, st.DeletionGracePeriod = Terminating, now, o.grace
	var changes []*Change
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		e.exec.unscheduleLocked(r)
		e.exec.interruptLocked(r)
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
