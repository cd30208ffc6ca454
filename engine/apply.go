package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
)

// MaxApplyTargets bounds the desired list of one Apply.
const MaxApplyTargets = 20_000

// ApplySet is the desired state of one owner's set of targets (Apply).
type ApplySet struct {
	// Owner names the set; required, with the rules of a target name.
	Owner string
	// Selector scopes the set: every desired target carries these labels,
	// and only the owner's targets that carry them are pruned.
	Selector map[string]string
	// Targets is the complete desired list.
	Targets []*target.Spec
	// DryRun computes the result and changes nothing.
	DryRun bool
	// Writable, when set, limits pruning to the targets it returns true
	// for (the caller's write permission): the others are left alone.
	Writable func(name string) bool
}

// ApplyResult says what Apply did (or, for a dry run, would do). Every
// list is sorted by name.
type ApplyResult struct {
	Created, Updated, Unchanged, Deleted []string
	Conflicts                            []ApplyConflict
	// ForwardUpdates and ForwardDeletes, over a SharedStore, are the
	// updates and prunes of targets another replica probes: the caller
	// sends them to their owners (UpdateTarget, DeleteTarget). Their
	// names are in Updated and Deleted too.
	ForwardUpdates []*target.Spec
	ForwardDeletes []string
	// Revision is the revision of the call's last event, or the current
	// one when it changed nothing.
	Revision uint64
	DryRun   bool
}

// ApplyConflict is a desired target Apply left alone, and why.
type ApplyConflict struct {
	Name, Message string
}

// applyPlan is what Apply is to do.
type applyPlan struct {
	create, update []*target.Spec
	prune          []string
	unchanged      []string
	conflicts      []ApplyConflict
}

// Apply makes the targets of set.Owner exactly set.Targets: it creates
// the missing ones (owned by set.Owner), updates in place (as Update) those
// whose spec differs, and deletes gracefully (as Delete) the owner's
// active targets within set.Selector that the list leaves out. A desired
// name held by another owner, or created by Create, is a conflict, never
// taken over; so is a desired target that is terminating.
//
// The same set again changes nothing: no event, no revision. Over a store
// that is not shared, the call's changes are one Commit (all or none: a
// crash leaves the old set or the new one) and one contiguous run of
// events. Over a SharedStore (cluster mode) the creates and updates are
// written first, in transactions within the store's limits, and the
// prunes only after all of them: an interrupted call never prunes before
// the whole desired list is present; its events may interleave with
// others'. Applies run one at a time per engine.
func (e *Engine) Apply(ctx context.Context, set ApplySet) (*ApplyResult, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	if err := validateSet(set).Err(); err != nil {
		return nil, err
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	p, errs := e.plan(set)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	res := &ApplyResult{Unchanged: p.unchanged, Conflicts: p.conflicts, DryRun: set.DryRun}
	for _, s := range p.create {
		res.Created = append(res.Created, s.Name)
	}
	for _, s := range p.update {
		res.Updated = append(res.Updated, s.Name)
	}
	res.Deleted = p.prune
	if set.DryRun || len(p.create)+len(p.update)+len(p.prune) == 0 {
		res.Revision = e.feed.revision()
		return res, nil
	}
	if err := e.refuseUnwritable(); err != nil {
		return nil, err // a full disk: nothing of the set is applied
	}
	if e.shared != nil {
		return res, e.applyShared(ctx, set, p, res)
	}
	return res, e.applyLocal(ctx, set, p, res)
}

// validateSet checks what does not depend on the stored targets.
func validateSet(set ApplySet) field.List {
	var errs field.List
	errs = append(errs, target.ValidateName(field.NewPath("owner"), set.Owner)...)
	for k, v := range set.Selector {
		errs = append(errs, target.ValidateLabel(field.NewPath("selector").Key(k), k, v)...)
	}
	if len(set.Targets) > MaxApplyTargets {
		errs = append(errs, field.Invalid(field.NewPath("targets"), len(set.Targets), fmt.Sprintf("at most %d targets in one set", MaxApplyTargets)))
		return errs
	}
	seen := make(map[string]int, len(set.Targets))
	for i, s := range set.Targets {
		path := field.NewPath("targets").Index(i)
		if j, dup := seen[s.Name]; dup {
			errs = append(errs, field.Invalid(path.Child("name"), s.Name, fmt.Sprintf("also the name of targets[%d]", j)))
		}
		seen[s.Name] = i
		if !matchLabels(s.Labels, set.Selector) {
			errs = append(errs, field.Invalid(path.Child("labels"), s.Name, "must carry every label of the selector"))
		}
	}
	return errs
}

// plan compares set with the published targets and validates each
// desired target (against its stored spec when it is an update).
func (e *Engine) plan(set ApplySet) (*applyPlan, field.List) {
	current := e.feed.byName()
	p := &applyPlan{}
	var errs field.List
	desired := make(map[string]bool, len(set.Targets))
	for i, s := range set.Targets {
		desired[s.Name] = true
		cur, exists := current[s.Name]
		var old *target.Spec
		if exists {
			old = cur.spec
		}
		errs = append(errs, rebase(e.validateList(s, old), fmt.Sprintf("targets[%d]", i))...)
		switch {
		case !exists:
			p.create = append(p.create, s)
		case cur.owner == "":
			p.conflicts = append(p.conflicts, ApplyConflict{s.Name, "exists, created by CreateTarget: not managed by any owner"})
		case cur.owner != set.Owner:
			p.conflicts = append(p.conflicts, ApplyConflict{s.Name, "held by another owner"})
		case cur.phase() == Terminating:
			p.conflicts = append(p.conflicts, ApplyConflict{s.Name, "terminating: apply again once it is removed"})
		case sameSpec(cur.spec, s):
			p.unchanged = append(p.unchanged, s.Name)
		default:
			p.update = append(p.update, s)
		}
	}
	for name, cur := range current {
		if cur.owner == set.Owner && cur.phase() == Active && !desired[name] &&
			matchLabels(cur.spec.Labels, set.Selector) && (set.Writable == nil || set.Writable(name)) {
			p.prune = append(p.prune, name)
		}
	}
	byName := func(a, b *target.Spec) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(p.create, byName)
	slices.SortFunc(p.update, byName)
	slices.Sort(p.prune)
	slices.Sort(p.unchanged)
	slices.SortFunc(p.conflicts, func(a, b ApplyConflict) int { return strings.Compare(a.Name, b.Name) })
	return p, errs
}

// rebase moves errors of a target ("target.x") under root ("targets[3].x").
func rebase(errs field.List, root string) field.List {
	for _, fe := range errs {
		if rest, ok := strings.CutPrefix(fe.Field, "target"); ok {
			fe.Field = root + rest
		}
	}
	return errs
}

// sameSpec reports whether two specs say the same (an absent map or list
// equals an empty one, as the stores keep them).
func sameSpec(a, b *target.Spec) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// applyLocal runs p as one group: one Commit, one run of events. A create
// that fails (a limit) fails the call before anything is written.
func (e *Engine) applyLocal(ctx context.Context, set ApplySet, p *applyPlan, res *ApplyResult) error {
	client, now := ClientFrom(ctx), e.clock.Now()
	g := e.commits.open()
	created := make([]*Change, 0, len(p.create))
	for _, s := range p.create {
		c, _, err := e.createLocal(s, client, set.Owner, now, g)
		if err != nil {
			for _, c := range created {
				e.unregister(c.entry)
			}
			g.drop()
			return err
		}
		created = append(created, c)
	}
	var failed []ApplyConflict
	for _, s := range p.update {
		if _, _, err := e.update(ctx, s, g); err != nil {
			// Update leaves a target it fails to update untouched.
			failed = append(failed, ApplyConflict{s.Name, "not updated: " + err.Error()})
		}
	}
	var pruned []string
	for _, name := range p.prune {
		en, err := e.acquire(ctx, name)
		if err != nil {
			continue // gone meanwhile
		}
		if en.phase() == Terminating {
			en.mu.Unlock()
			continue
		}
		if _, _, err := e.terminateLocked(en, deleteOptions{}, g); err == nil {
			pruned = append(pruned, name)
		}
	}
	done := g.commit()
	var err error
	if done != nil {
		// Not ctx: the group is queued and will be written (see Create).
		err = <-done
	}
	for _, c := range created {
		if _, cerr := e.finishCreate(c, err); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	res.Deleted = pruned
	res.Updated = slices.DeleteFunc(res.Updated, func(n string) bool {
		return slices.ContainsFunc(failed, func(f ApplyConflict) bool { return f.Name == n })
	})
	res.Conflicts = sortedConflicts(append(res.Conflicts, failed...))
	res.Revision = g.revision()
	if res.Revision == 0 {
		res.Revision = e.feed.revision()
	}
	return nil
}

// applyShared runs p over a SharedStore: creates (conditional writes, in
// transactions within the store's limits) and updates of the targets
// this replica probes first; prunes only once all of those are written.
// Updates and prunes of targets other replicas probe are returned in
// res.ForwardUpdates and res.ForwardDeletes.
func (e *Engine) applyShared(ctx context.Context, set ApplySet, p *applyPlan, res *ApplyResult) error {
	client, now := ClientFrom(ctx), e.clock.Now()
	type pending struct {
		name string
		done <-chan error
	}
	var writes []pending
	if len(p.create) > 0 {
		names := make([]string, len(p.create))
		for i, s := range p.create {
			names[i] = s.Name
		}
		// The limits, as Create's; the store decides existence (a name
		// created meanwhile is a conflict, not a failed call).
		finish, err := e.startCreates(ctx, names, client, func() error {
			return e.checkRoomLocked(client, len(names))
		})
		if err != nil {
			return err
		}
		defer finish()
	}
	for _, s := range p.create {
		done, err := e.commits.submit([]*Change{e.sharedCreation(s, client, set.Owner, now)}, true)
		if err != nil {
			return err
		}
		writes = append(writes, pending{s.Name, done})
	}
	var failed []ApplyConflict
	for _, s := range p.update {
		_, done, err := e.update(ctx, s, e.commits)
		switch {
		case errors.Is(err, ErrNotOwned):
			res.ForwardUpdates = append(res.ForwardUpdates, s)
		case err != nil:
			failed = append(failed, ApplyConflict{s.Name, "not updated: " + err.Error()})
		default:
			writes = append(writes, pending{s.Name, done})
		}
	}
	var firstErr error
	for _, w := range writes {
		err := <-w.done // queued: written or failed whether we wait or not
		switch {
		case errors.Is(err, ErrAlreadyExists):
			failed = append(failed, ApplyConflict{w.name, "created meanwhile by another call"})
		case err != nil && firstErr == nil:
			firstErr = err
		}
	}
	if firstErr != nil {
		return firstErr // no prune after a failed write
	}
	var prunes []<-chan error
	var pruned []string
	for _, name := range p.prune {
		en, err := e.acquire(ctx, name)
		switch {
		case errors.Is(err, ErrNotOwned):
			res.ForwardDeletes = append(res.ForwardDeletes, name)
			pruned = append(pruned, name)
			continue
		case err != nil:
			continue // gone meanwhile
		}
		if en.phase() == Terminating {
			en.mu.Unlock()
			continue
		}
		if _, done, err := e.terminateLocked(en, deleteOptions{}, e.commits); err == nil {
			prunes = append(prunes, done)
			pruned = append(pruned, name)
		}
	}
	for _, done := range prunes {
		if err := <-done; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	slices.Sort(pruned)
	res.Deleted = pruned
	drop := func(names []string) []string {
		return slices.DeleteFunc(names, func(n string) bool {
			return slices.ContainsFunc(failed, func(f ApplyConflict) bool { return f.Name == n })
		})
	}
	res.Created, res.Updated = drop(res.Created), drop(res.Updated)
	res.Conflicts = sortedConflicts(append(res.Conflicts, failed...))
	res.Revision = e.feed.revision()
	return firstErr
}

func sortedConflicts(c []ApplyConflict) []ApplyConflict {
	slices.SortFunc(c, func(a, b ApplyConflict) int { return strings.Compare(a.Name, b.Name) })
	return c
}
