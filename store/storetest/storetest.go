// Package storetest is the contract every engine.Store must pass: Run it
// from the store's own tests with a way to open (and reopen) its storage.
// The fixtures (specs, statuses and the changes the engine makes) are
// exported for benchmarks and other stores' tests.
package storetest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// Opener opens a store over the SAME underlying storage each time it is
// called (the same dir, the same in-memory data...), as a restarted
// process would. The tests Close each store they open before opening the
// next one.
type Opener func() engine.Store

// Run runs the contract tests, each as a named parallel subtest. open is
// called once per subtest (with the subtest's t) and must return an Opener
// over fresh, empty storage.
//
// A SharedStore (etcd) differs where the contract allows it: its revisions
// count writes that are not the store's (a new store's Load may have a
// revision above 0), and it compacts whole transactions (see
// harness.compact).
func Run(t *testing.T, open func(t *testing.T) Opener) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, ctx: t.Context(), open: open(t)}
			h.reopen()
			t.Cleanup(h.close)
			tc.run(h)
		})
	}
}

var cases = []struct {
	name string
	run  func(h *harness)
}{
	{"EmptyLoad", testEmptyLoad},
	{"CreateRoundtrip", testCreateRoundtrip},
	{"SetRevision", testSetRevision},
	{"StatusOnlyKeepsSpec", testStatusOnlyKeepsSpec},
	{"UpdateSpec", testUpdateSpec},
	{"DeleteKeepsEvent", testDeleteKeepsEvent},
	{"LateStatusAfterDelete", testLateStatusAfterDelete},
	{"RevisionsIncrease", testRevisionsIncrease},
	{"SameTargetInBatch", testSameTargetInBatch},
	{"EmptyBatch", testEmptyBatch},
	{"InvalidChangeWritesNothing", testInvalidChange},
	{"Compact", testCompact},
	{"CompactEverything", testCompactEverything},
	{"LifecyclePayload", testLifecyclePayload},
	{"Closed", testClosed},
	{"FollowDeliversCommits", testFollowDeliversCommits},
}

// harness holds the store under test and a model of what it must return.
type harness struct {
	t      *testing.T
	ctx    context.Context
	open   Opener
	s      engine.Store // the store open now; nil when closed
	model  model
	opened int
}

func (h *harness) reopen() {
	h.t.Helper()
	h.close()
	h.s = h.open()
	h.opened++
	if h.s == nil {
		h.t.Fatalf("open #%d returned nil", h.opened)
	}
}

func (h *harness) close() {
	h.t.Helper()
	if h.s == nil {
		return
	}
	if err := h.s.Close(); err != nil {
		h.t.Errorf("Close() = %v", err)
	}
	h.s = nil
}

// commit commits changes, checks the revisions it assigned and applies
// them to the model.
func (h *harness) commit(changes ...*engine.Change) {
	h.t.Helper()
	if err := h.s.Commit(h.ctx, changes); err != nil {
		h.t.Fatalf("Commit(%d changes) = %v", len(changes), err)
	}
	if len(changes) > 0 {
		h.model.lastCommit = changes[0].Event.Revision
	}
	for _, c := range changes {
		rev := c.Event.Revision
		if rev <= h.model.rev {
			h.t.Fatalf("Commit assigned revision %d to %s %q after revision %d: want strictly increasing",
				rev, c.Event.Kind, c.Name, h.model.rev)
		}
		// SetRevision: the event, the target's status and the event's
		// Target (the same pointer for lifecycle events).
		if c.Target != nil && c.Target.Status.Revision != rev {
			h.t.Errorf("%s %q: Target.Status.Revision = %d, want the event's %d", c.Event.Kind, c.Name, c.Target.Status.Revision, rev)
		}
		if c.Event.Target != nil && c.Event.Target.Status.Revision != rev {
			h.t.Errorf("%s %q: Event.Target.Status.Revision = %d, want the event's %d", c.Event.Kind, c.Name, c.Event.Target.Status.Revision, rev)
		}
		h.model.apply(c)
	}
}

func (h *harness) load() *engine.Stored {
	h.t.Helper()
	st, err := h.s.Load(h.ctx)
	if err != nil {
		h.t.Fatalf("Load() = %v", err)
	}
	if st == nil {
		h.t.Fatal("Load() = nil, nil")
	}
	return st
}

// check loads and compares with the model: the targets by name, the
// events in order, and a revision at least the model's.
func (h *harness) check() *engine.Stored {
	h.t.Helper()
	got := h.load()
	want := h.model.stored()
	if diff := cmp.Diff(want.Targets, sortTargets(got.Targets), cmpOpts); diff != "" {
		h.t.Errorf("Load().Targets mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Events, got.Events, cmpOpts); diff != "" {
		h.t.Errorf("Load().Events mismatch (-want +got):\n%s", diff)
	}
	if got.Revision < want.Revision {
		h.t.Errorf("Load().Revision = %d, want at least %d (the last assigned)", got.Revision, want.Revision)
	}
	for i := 1; i < len(got.Events); i++ {
		if got.Events[i].Revision <= got.Events[i-1].Revision {
			h.t.Errorf("Load().Events[%d].Revision = %d after %d: want revision order", i, got.Events[i].Revision, got.Events[i-1].Revision)
		}
	}
	return got
}

// cmpOpts compare times with Equal (cmp uses the method) and treat nil and
// empty maps and slices alike (a store need not tell them apart: neither
// store/codec nor JSON can).
var cmpOpts = cmp.Options{cmpopts.EquateEmpty()}

func sortTargets(ts []*engine.Target) []*engine.Target {
	return slices.SortedFunc(slices.Values(ts), func(a, b *engine.Target) int {
		return strings.Compare(a.Spec.Name, b.Spec.Name)
	})
}

// model is what the contract says a store holds after the commits so far.
type model struct {
	specs    map[string]*target.Spec
	statuses map[string]engine.Status
	events   []engine.Event
	rev      uint64 // the last revision assigned
	// lastCommit is the revision of the first change of the last Commit.
	lastCommit uint64
}

func (m *model) apply(c *engine.Change) {
	if m.specs == nil {
		m.specs, m.statuses = make(map[string]*target.Spec), make(map[string]engine.Status)
	}
	m.rev = c.Event.Revision
	switch {
	case c.Delete:
		delete(m.specs, c.Name)
		delete(m.statuses, c.Name)
	default:
		if c.SpecChanged {
			m.specs[c.Name] = c.Target.Spec
		}
		m.statuses[c.Name] = DurableStatus(c.Target.Status)
	}
	m.events = append(m.events, DurableEvent(c.Event))
}

// compact drops the events below before.
func (m *model) compact(before uint64) {
	m.events = slices.DeleteFunc(m.events, func(ev engine.Event) bool { return ev.Revision < before })
}

// mustDelete is the newest event that Compact(before) must delete, 0 if
// none: of the events below before, the newest that is not in the last
// Commit.
func (m *model) mustDelete(before uint64) uint64 {
	var rev uint64
	for _, ev := range m.events {
		if ev.Revision < before && ev.Revision < m.lastCommit {
			rev = ev.Revision
		}
	}
	return rev
}

// stored is what Load must return; targets sorted by name. A status
// without a spec (a late status-only change after a delete) is no target.
func (m *model) stored() *engine.Stored {
	st := &engine.Stored{Revision: m.rev, Events: slices.Clone(m.events)}
	for _, name := range slices.Sorted(maps.Keys(m.specs)) {
		st.Targets = append(st.Targets, &engine.Target{Spec: m.specs[name], Status: m.statuses[name]})
	}
	return st
}

// created commits the creation of specs (one batch) and returns the
// targets as created.
func (h *harness) created(specs ...*target.Spec) []*engine.Target {
	h.t.Helper()
	var changes []*engine.Change
	for i, s := range specs {
		changes = append(changes, Create(s, Epoch.Add(time.Duration(i)*time.Second)))
	}
	h.commit(changes...)
	ts := make([]*engine.Target, len(changes))
	for i, c := range changes {
		ts[i] = c.Target
	}
	return ts
}

func at(sec int) time.Time { return Epoch.Add(time.Duration(sec) * time.Second) }

// shared reports whether the store under test is a SharedStore.
func (h *harness) shared() bool {
	_, ok := h.s.(engine.SharedStore)
	return ok
}

// compact compacts the store below before, and the model with it.
//
// A store that is not shared deletes exactly the events below before (and
// reports the newest of them as Stored.Compacted: checked by the callers).
// A SharedStore over etcd compacts whole transactions, the unit of etcd's
// history, and never its newest one (etcd compacts at most up to its
// current revision): it may keep events below before when they share a
// transaction with one at or above it, or are in the last Commit. Its
// Stored.Compacted says where it cut: at least the newest event it had to
// delete, below before, and every event above it is kept (checked by the
// callers' check against the model compacted there).
func (h *harness) compact(before uint64) {
	h.t.Helper()
	if err := h.s.Compact(h.ctx, before); err != nil {
		h.t.Fatalf("Compact(%d) = %v", before, err)
	}
	if !h.shared() {
		h.model.compact(before)
		return
	}
	st := h.load()
	if must := h.model.mustDelete(before); st.Compacted < must || st.Compacted >= before && st.Compacted != 0 {
		h.t.Fatalf("after Compact(%d): Compacted = %d, want at least %d (the newest event of an older Commit below %d) and below %d (or 0)",
			before, st.Compacted, must, before, before)
	}
	h.model.compact(st.Compacted + 1)
}

func testEmptyLoad(h *harness) {
	st := h.load()
	// A shared store's revision counts others' writes too.
	if st.Revision != 0 && !h.shared() || len(st.Targets) != 0 || len(st.Events) != 0 || st.Compacted != 0 {
		h.t.Errorf("Load() of a new store = revision %d, %d targets, %d events, compacted %d; want 0, 0, 0, 0",
			st.Revision, len(st.Targets), len(st.Events), st.Compacted)
	}
	h.reopen()
	h.check()
}

func testCreateRoundtrip(h *harness) {
	h.created(Specs()...)
	h.check()
	h.reopen()
	h.check()
}

func testSetRevision(h *harness) {
	ts := h.created(Specs()...)
	tr := Transition(ts[0], probe.Startup, probe.Success, 1, at(10))
	h.commit(tr)
	for _, tg := range append(ts, tr.Target) {
		if tg.Status.Revision == 0 {
			h.t.Errorf("target %q: Status.Revision = 0 after Commit, want the assigned revision", tg.Spec.Name)
		}
	}
	h.reopen()
	st := h.check()
	byName := map[string]*engine.Target{}
	for _, tg := range st.Targets {
		byName[tg.Spec.Name] = tg
	}
	for _, want := range []*engine.Target{tr.Target, ts[1], ts[2]} {
		if got := byName[want.Spec.Name].Status.Revision; got != want.Status.Revision {
			h.t.Errorf("loaded target %q: Status.Revision = %d, want %d", want.Spec.Name, got, want.Status.Revision)
		}
	}
	for _, ev := range st.Events {
		if ev.Target != nil && ev.Target.Status.Revision != ev.Revision {
			h.t.Errorf("loaded %s event %d: Target.Status.Revision = %d, want the event's revision (Commit must encode after SetRevision)",
				ev.Kind, ev.Revision, ev.Target.Status.Revision)
		}
	}
}

func testStatusOnlyKeepsSpec(h *harness) {
	ts := h.created(WebSpec("web"))
	c := Transition(ts[0], probe.Readiness, probe.Success, 2, at(10))
	// A spec the store must not write: SpecChanged is false.
	other := WebSpec("web")
	other.Labels = map[string]string{"written": "wrongly"}
	c.Target.Spec = other
	if err := h.s.Commit(h.ctx, []*engine.Change{c}); err != nil {
		h.t.Fatalf("Commit() = %v", err)
	}
	c.Target.Spec = ts[0].Spec
	h.model.apply(c)
	h.reopen()
	h.check()
}

func testUpdateSpec(h *harness) {
	ts := h.created(WebSpec("web"), TCPSpec("db"))
	spec := WebSpec("web")
	spec.Labels = map[string]string{"app": "web", "version": "2"}
	spec.StartupProbe = nil
	u := Update(ts[0], spec, at(10))
	h.commit(u, Transition(u.Target, probe.Readiness, probe.Success, 2, at(11)))
	h.reopen()
	h.check()
}

func testDeleteKeepsEvent(h *harness) {
	ts := h.created(WebSpec("web"), TCPSpec("db"))
	h.commit(Terminate(ts[0], at(10)))
	h.commit(Delete("web", at(15)))
	h.reopen()
	st := h.check()
	if last := st.Events[len(st.Events)-1]; last.Kind != engine.KindDeleted || last.Name != "web" {
		h.t.Errorf("last event = %s %q, want DELETED \"web\"", last.Kind, last.Name)
	}
	// The name can be registered again.
	h.created(BareSpec("web"))
	h.reopen()
	h.check()
}

func testLateStatusAfterDelete(h *harness) {
	ts := h.created(WebSpec("web"))
	h.commit(Delete("web", at(10)), Transition(ts[0], probe.Liveness, probe.Failure, 3, at(11)))
	h.reopen()
	if st := h.check(); len(st.Targets) != 0 {
		h.t.Errorf("Load() = %d targets, want none: a status-only change must not bring back a deleted target", len(st.Targets))
	}
}

func testRevisionsIncrease(h *harness) {
	ts := h.created(Specs()...) // strictly increasing within the batch (checked by commit)
	h.commit(Transition(ts[0], probe.Startup, probe.Success, 1, at(10)), Transition(ts[1], probe.Readiness, probe.Success, 1, at(10)))
	last := h.model.rev
	h.reopen()
	if got := h.check().Revision; got < last {
		h.t.Fatalf("after reopen Load().Revision = %d, want at least %d", got, last)
	}
	c := Transition(ts[0], probe.Liveness, probe.Failure, 3, at(20))
	h.commit(c) // checks c's revision > last: never reused after reopen
	for range 2 {
		h.reopen()
		h.commit(Transition(c.Target, probe.Liveness, probe.Success, 1, at(30)))
	}
	h.check()
}

func testSameTargetInBatch(h *harness) {
	c0 := Create(WebSpec("web"), at(0))
	c1 := Transition(c0.Target, probe.Startup, probe.Success, 1, at(1))
	c2 := Transition(c1.Target, probe.Readiness, probe.Success, 2, at(2))
	c3 := Transition(c2.Target, probe.Liveness, probe.Failure, 3, at(3))
	c4 := Terminate(c3.Target, at(4))
	h.commit(c0, c1, c2, c3, c4)
	h.reopen()
	st := h.check()
	if len(st.Targets) != 1 || st.Targets[0].Status.Phase != engine.Terminating {
		h.t.Errorf("Load().Targets = %v, want web terminating (the last status of the batch)", st.Targets)
	}
}

func testEmptyBatch(h *harness) {
	h.created(BareSpec("a"))
	if err := h.s.Commit(h.ctx, nil); err != nil {
		h.t.Errorf("Commit(no changes) = %v, want nil", err)
	}
	h.check()
}

// testFollowDeliversCommits: Follow from the revision Load returned
// delivers the store's own commits, each batch whole, in order, with its
// revisions, and a position that covers it (the engine publishes only what
// Follow delivers).
func testFollowDeliversCommits(h *harness) {
	from := h.load().Revision
	type delivery struct {
		pos   uint64
		names []string
		revs  []uint64
	}
	got := make(chan delivery, 16)
	ctx, cancel := context.WithCancel(h.ctx)
	followed := make(chan error, 1)
	go func() {
		followed <- h.s.Follow(ctx, from, func(fd engine.Delivery) {
			if len(fd.Changes) == 0 {
				return // only a position
			}
			d := delivery{pos: fd.Pos}
			for _, c := range fd.Changes {
				d.names = append(d.names, c.Name)
				d.revs = append(d.revs, c.Event.Revision)
			}
			got <- d
		})
	}()
	defer func() {
		cancel()
		if err := <-followed; err != nil {
			h.t.Errorf("Follow() = %v, want nil once its ctx is done", err)
		}
	}()
	a := h.created(BareSpec("a"), BareSpec("b"))
	h.commit(Transition(a[0], probe.Readiness, probe.Success, 1, at(5)))
	h.commit(Delete("b", at(6)))
	want := [][]string{{"a", "b"}, {"a"}, {"b"}}
	// The bound only keeps a broken store from hanging the test.
	deadline := time.After(10 * time.Second)
	var last uint64
	for i, names := range want {
		select {
		case d := <-got:
			if !slices.Equal(d.names, names) {
				h.t.Fatalf("delivery %d: changes of %v, want %v (each Commit whole, in order)", i, d.names, names)
			}
			for _, rev := range d.revs {
				if rev <= last || rev <= from {
					h.t.Errorf("delivery %d: revision %d after %d (followed from %d): want increasing", i, rev, last, from)
				}
				last = rev
			}
			if d.pos < last {
				h.t.Errorf("delivery %d: position %d below its last revision %d", i, d.pos, last)
			}
		case <-deadline:
			h.t.Fatalf("Follow delivered %d of %d batches within 10s", i, len(want))
		}
	}
}

func testInvalidChange(h *harness) {
	h.created(BareSpec("a"))
	before := h.load()
	bad := []*engine.Change{Create(WebSpec("web"), at(1)), {Name: "broken", Event: engine.Event{Name: "broken", Kind: engine.KindUpdated}}}
	if err := h.s.Commit(h.ctx, bad); err == nil {
		h.t.Fatal("Commit(a change with no Target that is not a delete) = nil, want an error")
	}
	if diff := cmp.Diff(before, h.load(), cmpOpts); diff != "" {
		h.t.Errorf("a failed Commit wrote something (-before +after):\n%s", diff)
	}
	h.reopen()
	h.check()
	h.commit(Create(TCPSpec("db"), at(2)))
	h.check()
}

// events commits n transitions of one target, one per commit, and returns
// their changes.
func (h *harness) transitions(tg *engine.Target, n int) []*engine.Change {
	var out []*engine.Change
	results := [...]probe.Result{probe.Success, probe.Failure}
	for i := range n {
		c := Transition(tg, probe.Readiness, results[i%2], int32(i+1), at(10+i))
		h.commit(c)
		out = append(out, c)
		tg = c.Target
	}
	return out
}

func testCompact(h *harness) {
	ts := h.created(WebSpec("web"), TCPSpec("db"))
	cs := h.transitions(ts[0], 8)
	rev := h.model.rev
	before := cs[4].Event.Revision

	h.compact(0)
	h.check()

	// Each transition is a Commit of its own: even a store that compacts
	// whole Commits deletes exactly the events below before.
	h.compact(before)
	st := h.check()
	if len(st.Events) != 4 || st.Events[0].Revision != before {
		h.t.Errorf("after Compact(%d): %d events from revision %d, want 4 from %d", before, len(st.Events), firstRev(st), before)
	}
	compacted := st.Compacted
	if want := cs[3].Event.Revision; st.Compacted != want && !h.shared() {
		h.t.Errorf("after Compact(%d): Compacted = %d, want %d (the newest deleted event)", before, st.Compacted, want)
	}
	if err := h.s.Compact(h.ctx, before); err != nil { // again: nothing to do
		h.t.Fatalf("Compact(%d) again = %v", before, err)
	}
	h.reopen()
	if st := h.check(); st.Revision < rev || st.Compacted != compacted {
		h.t.Errorf("after Compact and reopen Load() = revision %d, compacted %d; want at least %d and %d", st.Revision, st.Compacted, rev, compacted)
	}
	h.commit(Transition(cs[7].Target, probe.Liveness, probe.Failure, 3, at(30)))
	h.check()
}

func testCompactEverything(h *harness) {
	ts := h.created(Specs()...)
	h.transitions(ts[1], 3)
	rev := h.model.rev
	h.compact(rev + 1)
	h.reopen()
	st := h.check()
	// A shared store keeps its last Commit (see compact).
	if len(st.Events) != 0 && !h.shared() || st.Revision < rev {
		h.t.Errorf("after compacting everything: %d events, revision %d; want 0 events, revision at least %d", len(st.Events), st.Revision, rev)
	}
	h.commit(Delete("bare", at(50))) // a revision above every compacted one
	h.check()
}

func firstRev(st *engine.Stored) uint64 {
	if len(st.Events) == 0 {
		return 0
	}
	return st.Events[0].Revision
}

func testLifecyclePayload(h *harness) {
	ts := h.created(WebSpec("web"))
	r := Reset(ts[0], at(5))
	upd := WebSpec("web")
	upd.Labels = map[string]string{"app": "web", "rollout": "canary"}
	u := Update(r.Target, upd, at(6))
	tm := Terminate(u.Target, at(7))
	h.commit(r, u, tm, Delete("web", at(8)))
	h.reopen()
	st := h.check()
	for _, ev := range st.Events {
		if !ev.Kind.Lifecycle() || ev.Kind == engine.KindDeleted {
			continue
		}
		if ev.Target == nil || ev.Target.Spec == nil {
			h.t.Errorf("loaded %s event %d has no Target, want the target's spec and status", ev.Kind, ev.Revision)
			continue
		}
		// Ratcheting (KEP-4818) keeps a sleep of 0 valid on update only
		// if the stored spec still has it after a restart.
		if !ev.Target.Spec.UsesZeroSleep() {
			h.t.Errorf("loaded %s event %d: Spec.UsesZeroSleep() = false, want the preStop sleep of 0 kept", ev.Kind, ev.Revision)
		}
		if !ev.Target.Spec.UsesMilliseconds() {
			h.t.Errorf("loaded %s event %d: Spec.UsesMilliseconds() = false, want the *Milliseconds fields kept", ev.Kind, ev.Revision)
		}
		if ev.Labels["app"] != "web" || ev.Target.Spec.Labels["app"] != "web" {
			h.t.Errorf("loaded %s event %d: labels %v / %v, want app=web", ev.Kind, ev.Revision, ev.Labels, ev.Target.Spec.Labels)
		}
	}
}

func testClosed(h *harness) {
	ts := h.created(WebSpec("web"))
	s := h.s
	h.close()
	if _, err := s.Load(h.ctx); err == nil {
		h.t.Error("Load() after Close = nil error, want an error")
	}
	if err := s.Commit(h.ctx, []*engine.Change{Transition(ts[0], probe.Startup, probe.Success, 1, at(5))}); err == nil {
		h.t.Error("Commit() after Close = nil error, want an error")
	}
	if err := s.Compact(h.ctx, 100); err == nil {
		h.t.Error("Compact() after Close = nil error, want an error")
	}
	h.reopen()
	h.check()
}
