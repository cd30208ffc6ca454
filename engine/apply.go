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
	// Forward, over a SharedStore, updates and prunes the targets other
	// replicas probe (the server forwards them to their owners); nil:
	// their updates are conflicts and they are not pruned. An update it
	// could not write withholds every prune of the call.
	Forward ApplyForwarder
	// ticket is the hold of the set's lock of a resumed apply
	// (ResumeApply), which has taken it already.
	ticket *ApplyTicket
}

// An ApplyForwarder sends an Apply's updates and prunes of targets
// another replica probes to that replica (cluster mode: the server, as
// UpdateTarget and DeleteTarget calls of the Apply's caller).
type ApplyForwarder interface {
	// Update updates the targets of specs; it returns those it could
	// not update, and why.
	Update(ctx context.Context, specs []*target.Spec) []ApplyConflict
	// Delete deletes the named targets gracefully; it returns those
	// deleted (or found gone).
	Delete(ctx context.Context, names []string) []string
}

// ApplyResult says what Apply did (or, for a dry run, would do). Every
// list is sorted by name.
type ApplyResult struct {
	Created, Updated, Unchanged, Deleted []string
	Conflicts                            []ApplyConflict
	// Revision is the revision of the call's last event, or the current
	// one when it changed nothing.
	Revision uint64
	DryRun   bool
	// incomplete: an update or a prune failed (a conflict of Conflicts,
	// or a prune left out of Deleted; after a failed update, every
	// prune) for a reason that may pass: a recorded apply is resumed
	// (again) (applyJournaledLocked).
	incomplete bool
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
// whose Commit takes the whole set (bbolt, memory), the call's changes
// are one Commit (all or none: a crash leaves the old set or the new one)
// and one contiguous run of events. Over a store that bounds its batches
// (a BatchLimiter: etcd, whose transactions take 62 changes) the creates
// and updates are written first, in transactions within the store's
// limits, and the prunes only after all of them: an interrupted call
// never prunes before the whole desired list is present; its events may
// interleave with others'. The updates of targets other replicas probe
// (ApplySet.Forward) are among those the prunes wait for, over every
// store; while one of them could not be written (its shard changing
// hands), nothing is pruned: it is a conflict of the result. Over an
// ApplyJournal the desired list is recorded before the first write and
// forgotten once the call ends; an apply interrupted by the replica's
// death (or its lost lease), or that left an update or a prune undone,
// stays recorded, and a replica finishes it (ResumeApply), so that it
// ends all applied. One apply of a set runs at a time in the cluster; an
// apply that is recorded runs to its end whether or not its caller waits.
// Applies run one at a time per engine.
func (e *Engine) Apply(ctx context.Context, set ApplySet) (*ApplyResult, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	if err := validateSet(set).Err(); err != nil {
		return nil, err
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.journal != nil && !set.DryRun {
		return e.applyJournaledLocked(ctx, set)
	}
	p, errs := e.plan(set)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	res := p.result(set)
	if set.DryRun || p.empty() {
		res.Revision = e.feed.revision()
		return res, nil
	}
	if err := e.refuseUnwritable(); err != nil {
		return nil, err // a full disk: nothing of the set is applied
	}
	if e.commits.limits != nil {
		return res, e.applyShared(ctx, set, p, res, nil)
	}
	return res, e.applyLocal(ctx, set, p, res)
}

// result is what p would do, before it is done.
func (p *applyPlan) result(set ApplySet) *ApplyResult {
	res := &ApplyResult{Unchanged: p.unchanged, Conflicts: p.conflicts, DryRun: set.DryRun}
	for _, s := range p.create {
		res.Created = append(res.Created, s.Name)
	}
	for _, s := range p.update {
		res.Updated = append(res.Updated, s.Name)
	}
	res.Deleted = p.prune
	return res
}

// empty reports whether p changes nothing.
func (p *applyPlan) empty() bool {
	return len(p.create)+len(p.update)+len(p.prune) == 0
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

// applyLocal runs p as one group: one Commit, one run of events. A
// create that fails (a limit, a checker) fails the call before anything
// is written; a name created meanwhile by another call is a conflict.
// With updates of other replicas' targets (set.Forward), the prunes are a
// second group, after those updates (none when one failed).
func (e *Engine) applyLocal(ctx context.Context, set ApplySet, p *applyPlan, res *ApplyResult) error {
	client, now := ClientFrom(ctx), e.clock.Now()
	var failed []ApplyConflict
	create := p.create
	if len(create) > 0 {
		for _, s := range create {
			if err := e.checkProbes(s); err != nil {
				return err
			}
		}
		names := make([]string, len(create))
		for i, s := range create {
			names[i] = s.Name
		}
		finish, err := e.startCreates(ctx, names, client, func() error {
			create = slices.DeleteFunc(slices.Clone(create), func(s *target.Spec) bool {
				_, exists := e.targets[s.Name]
				if exists {
					failed = append(failed, ApplyConflict{s.Name, "created meanwhile by another call"})
				}
				return exists
			})
			return e.checkRoomLocked(client, len(create))
		})
		if err != nil {
			return err
		}
		defer finish()
	}
	g := e.commits.open()
	for _, s := range create {
		if _, err := g.submit([]*Change{e.creation(s, client, set.Owner, now)}, false); err != nil {
			g.drop()
			return err
		}
	}
	var forwarded []*target.Spec
	unwritten := 0 // desired updates that failed
	for _, s := range p.update {
		_, _, err := e.update(ctx, s, g)
		switch {
		case errors.Is(err, ErrNotOwned) && set.Forward != nil:
			forwarded = append(forwarded, s)
		case err != nil:
			// Update leaves a target it fails to update untouched.
			failed = append(failed, ApplyConflict{s.Name, "not updated: " + err.Error()})
			unwritten++
		}
	}
	if len(forwarded) > 0 {
		// Other replicas' targets (a SharedStore whose Commit takes the
		// whole set: memory.Shared): the group is written first (it is
		// not held open across calls to other replicas), then their
		// updates; the prunes come after both, in a group of their own.
		if err := groupWritten(g.commit()); err != nil {
			return err
		}
		refused := set.Forward.Update(ctx, forwarded)
		failed, unwritten = append(failed, refused...), unwritten+len(refused)
		g = e.commits.open()
	}
	var pruned, elsewhere []string
	if unwritten > 0 {
		// No prune before the whole desired list is written.
		p.prune = nil
		res.incomplete = true
	}
	for _, name := range p.prune {
		en, err := e.acquire(ctx, name)
		switch {
		case errors.Is(err, ErrNotOwned):
			elsewhere = append(elsewhere, name)
			continue
		case err != nil:
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
	if err := groupWritten(g.commit()); err != nil {
		return err
	}
	if len(elsewhere) > 0 && set.Forward != nil {
		pruned = append(pruned, set.Forward.Delete(ctx, elsewhere)...)
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
	res.Revision = g.revision()
	if res.Revision == 0 {
		res.Revision = e.feed.revision()
	}
	return nil
}

// applyShared runs p over a store that bounds its batches (etcd): creates
// (conditional writes, in transactions within the store's limits,
// carrying t when the apply is journaled) and updates, those of targets
// other replicas probe through set.Forward, first; prunes only once all
// of those are written (none when an update failed: the apply is left
// incomplete).
func (e *Engine) applyShared(ctx context.Context, set ApplySet, p *applyPlan, res *ApplyResult, t *ApplyTicket) error {
	client, now := ClientFrom(ctx), e.clock.Now()
	type pending struct {
		name string
		done <-chan error
	}
	var writes []pending
	if len(p.create) > 0 {
		for _, s := range p.create {
			if err := e.checkProbes(s); err != nil {
				return err
			}
		}
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
		created := e.creation(s, client, set.Owner, now)
		created.Apply = t
		done, err := e.commits.submit([]*Change{created}, true)
		if err != nil {
			return err
		}
		writes = append(writes, pending{s.Name, done})
	}
	var failed []ApplyConflict
	var forwarded []*target.Spec
	for _, s := range p.update {
		_, done, err := e.update(ctx, s, e.commits)
		switch {
		case errors.Is(err, ErrNotOwned) && set.Forward != nil:
			forwarded = append(forwarded, s)
		case err != nil:
			failed = append(failed, ApplyConflict{s.Name, "not updated: " + err.Error()})
		default:
			writes = append(writes, pending{s.Name, done})
		}
	}
	if len(forwarded) > 0 {
		failed = append(failed, set.Forward.Update(ctx, forwarded)...)
	}
	// Updates not written (a forward that found the shard changing
	// hands): the desired list is not whole, so nothing is pruned; the
	// apply is left incomplete, to be resumed (applyJournaledLocked).
	unwritten := len(failed) > 0
	res.incomplete = unwritten
	var firstErr error
	for _, w := range writes {
		err := <-w.done // queued: written or failed whether we wait or not
		switch {
		case errors.Is(err, ErrAlreadyExists):
			failed = append(failed, ApplyConflict{w.name, "created meanwhile by another call"})
			res.incomplete = true
		case err != nil && firstErr == nil:
			firstErr = err
		}
	}
	if firstErr != nil {
		return firstErr // no prune after a failed write
	}
	if unwritten {
		p.prune = nil
	}
	var prunes []<-chan error
	var pruned, elsewhere []string
	for _, name := range p.prune {
		en, err := e.acquire(ctx, name)
		switch {
		case errors.Is(err, ErrNotOwned):
			elsewhere = append(elsewhere, name)
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
	if len(elsewhere) > 0 && set.Forward != nil {
		deleted := set.Forward.Delete(ctx, elsewhere)
		pruned = append(pruned, deleted...)
		res.incomplete = res.incomplete || len(deleted) < len(elsewhere)
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

// groupWritten waits for a group's Commit (done nil: the group was empty). Not
// for a context: the group is queued and will be written (see Create).
func groupWritten(done <-chan error) error {
	if done == nil {
		return nil
	}
	return <-done
}

func sortedConflicts(c []ApplyConflict) []ApplyConflict {
	slices.SortFunc(c, func(a, b ApplyConflict) int { return strings.Compare(a.Name, b.Name) })
	return c
}
