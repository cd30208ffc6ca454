package engine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// feed is the published side of the engine: the targets as of the last
// published revision (the view), the retained history, and the watchers.
// Everything in it changes only in publish, after the store made the
// changes durable, and under one lock, so a snapshot of the view is exactly
// the state at its revision.
type feed struct {
	mu      sync.Mutex
	rev     uint64                 // last published revision; guarded by mu
	view    *btree.BTreeG[*record] // by name; guarded by mu
	labels  labelIndex             // the view by label; guarded by mu
	hist    history                // guarded by mu
	synced  map[*Watcher]struct{}  // watchers that receive pushes; guarded by mu
	closed  error                  // set by close; guarded by mu
	watched int                    // open watchers; guarded by mu
	onEvict func()                 // a watcher was ended as too slow; set before use
	// maxWatchers limits watched (0: no limit); set before use.
	maxWatchers int
	// maxWatchersPerClient limits watchedBy[client] (0: no limit); set
	// before use.
	maxWatchersPerClient int
	watchedBy            map[string]int // open watchers per client identity; guarded by mu
	// watcherBytes and totalBytes bound the (estimated) bytes of events
	// pending in one watcher's queue and in all of them (0: no bound);
	// set before use.
	watcherBytes, totalBytes int
	// queued is the bytes pending in every watcher's queue: added by
	// publish (under mu), taken by Next and Close (under the watcher's
	// lock only), hence atomic.
	queued atomic.Int64
	// effective computes a probe's effective timing with the server's
	// floors, for targets that do not carry it; set before use.
	effective func(*probe.Spec) probe.Effective
	// reached holds the callbacks waiting for rev to reach a revision,
	// sorted by that revision (in the order registered for each); guarded
	// by mu.
	reached  []revWaiter
	waiterID uint64 // the last revWaiter.id given

	// stale, while set, is why the view cannot be vouched for (Suspend);
	// guarded by mu.
	stale error
	// epoch counts the reloads (reload.go); guarded by mu.
	epoch uint64
	// lostAfter and lostUpTo: the revisions after lostAfter up to lostUpTo
	// were published here, then lost when the store went back in time
	// (a watch that saw some of them is refused); guarded by mu.
	lostAfter, lostUpTo uint64

	// key is the view's search key of getLocked, reused (a restore looks
	// up one target per event); guarded by mu.
	key     record
	keySpec target.Spec
}

// revWaiter is a callback run once the feed's revision reaches rev.
type revWaiter struct {
	rev uint64
	id  uint64 // whenReached's count: the waiter's identity for its stop
	fn  func()
}

func byName(a, b *record) bool { return a.spec.Name < b.spec.Name }

// named is the key of a record by name.
func named(name string) *record { return &record{spec: nameOnly(name)} }

func newFeed(historyCount, historyBytes int) *feed {
	return &feed{
		view:   btree.NewG(32, byName),
		labels: newLabelIndex(),
		hist:   newHistory(historyCount, historyBytes),
		synced: make(map[*Watcher]struct{}),

		watchedBy: make(map[string]int),
	}
}

// restore loads stored state and returns the records of its targets, as
// the view holds them; called before anything is published.
func (f *feed) restore(st *Stored) []*record {
	f.mu.Lock()
	defer f.mu.Unlock()
	records := make([]*record, 0, len(st.Targets))
	for _, t := range st.Targets {
		r := newRecord(t)
		f.putLocked(r)
		records = append(records, r)
	}
	f.hist.compacted = st.Compacted
	f.hist.reserve(len(st.Events))
	// Events the bounds drop here are still in the store: they count
	// towards the next compaction.
	for _, ev := range st.Events {
		f.restoreEventLocked(&f.hist, ev)
	}
	f.rev = st.Revision
	return records
}

// getLocked returns the view's record of the target named name; f.mu
// held.
func (f *feed) getLocked(name string) (*record, bool) {
	f.keySpec.Name = name
	f.key.spec = &f.keySpec
	r, ok := f.view.Get(&f.key)
	f.keySpec.Name = ""
	return r, ok
}

// restoreEventLocked appends a stored event to hist, the view holding
// the stored targets already. The store decodes a name, a label map and
// (for lifecycle events) a whole target per event, where events published
// live share their target's: the event takes the view's name, labels and
// spec when they are equal (at 100,000 targets the copies were ~10% of
// the heap after a restart), and the view's record when the target has
// not changed since. Its message is bounded here, once: the engine bounds
// what it writes, data of older versions may not be, and what is
// published must be valid UTF-8. f.mu held.
func (f *feed) restoreEventLocked(hist *history, ev Event) {
	ev.Message = probe.BoundMessage(ev.Message)
	ev.Reason = knownReason(ev.Reason)
	cur, ok := f.getLocked(ev.Name)
	if ok {
		ev.Name = cur.spec.Name
		if len(ev.Labels) > 0 && maps.Equal(cur.spec.Labels, ev.Labels) {
			ev.Labels = cur.spec.Labels
		}
	}
	var rec *record
	switch t := ev.Target; {
	case t == nil:
	case ok && cur.rev == t.Status.Revision && cur.rev == ev.Revision:
		rec = cur
	case ok && t.Spec != cur.spec && reflect.DeepEqual(t.Spec, cur.spec):
		// Not t itself: Stored may be the store's own.
		shared := Target{Spec: cur.spec, Status: t.Status}
		rec = newRecord(&shared)
	default:
		rec = newRecord(t)
	}
	hist.append(ev, rec, ev.size())
}

// knownReason returns the engine's string of reason when it is one of
// its reasons (stored events decode a string each), else reason.
func knownReason(reason string) string {
	for _, r := range [...]string{ReasonProbe, ReasonTerminating, ReasonReset, ReasonUpdated} {
		if reason == r {
			return r
		}
	}
	return reason
}

// sharedLabels returns the labels of a published target equal to labels
// (the same map, which specs never modify), or labels when it finds none.
func (f *feed) sharedLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.labels.equal(labels); ok {
		return l
	}
	return labels
}

// publish makes durable changes visible: the view, the history and every
// synced watcher. It never blocks on a watcher.
func (f *feed) publish(changes []*Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range changes {
		if c.Delete {
			f.removeLocked(c.Target.Spec.Name)
		} else {
			f.putLocked(c.record())
		}
		size := c.Event.size()
		// The history keeps the target's record, the one the view has
		// when it is the same target (Event.Target is c.Target then).
		var rec *record
		if t := c.Event.Target; t != nil {
			if rec = c.record(); t != c.Target {
				rec = newRecord(t)
			}
		}
		f.hist.append(c.Event, rec, size)
		if i < len(changes)-1 {
			f.hist.joinNext() // a catch-up takes the delivery whole too
		}
		f.rev = max(f.rev, c.Event.Revision)
		for w := range f.synced {
			if !f.pushLocked(w, &c.Event, size) {
				f.evictedLocked(w)
			}
		}
		f.trimLocked()
	}
	for w := range f.synced {
		f.advanceLocked(w, f.rev)
	}
}

// target returns the Target of r, the effective timing of its probes
// filled in (the server's floors applied).
func (f *feed) target(r *record) *Target { return r.target(f.effective) }

// evictedLocked takes w, which failed, out of the synced set; f.mu held.
func (f *feed) evictedLocked(w *Watcher) {
	delete(f.synced, w)
	if f.onEvict != nil {
		f.onEvict()
	}
}

// trimLocked ends the slowest watchers — those with the most bytes
// pending — until the bytes pending in all of them are within
// totalBytes; f.mu held. Many slow watchers together cannot take more
// memory than that, whatever each one's own bound.
func (f *feed) trimLocked() {
	for f.totalBytes > 0 && f.queued.Load() > int64(f.totalBytes) {
		var slowest *Watcher
		most := 0
		for w := range f.synced {
			if n := w.pendingBytes(); n > most {
				slowest, most = w, n
			}
		}
		if slowest == nil {
			return
		}
		f.failSlowLocked(slowest, fmt.Sprintf("the slowest watcher when more than %d bytes of events were pending in all watchers (--watch-total-bytes)", f.totalBytes))
		f.evictedLocked(slowest)
	}
}

// reach records that everything up to rev has been published (a shared
// store's followed position, which may pass revisions with no event):
// watchers and progress notifications may claim it, and the callbacks
// waiting for it run (after the lock is released).
func (f *feed) reach(rev uint64) {
	f.mu.Lock()
	if rev > f.rev {
		f.rev = rev
		for w := range f.synced {
			f.advanceLocked(w, rev)
		}
	}
	due := f.dueLocked()
	f.mu.Unlock()
	for _, w := range due {
		w.fn()
	}
}

// dueLocked removes and returns the callbacks waiting for a revision the
// feed has reached.
func (f *feed) dueLocked() []revWaiter {
	n := 0
	for n < len(f.reached) && f.reached[n].rev <= f.rev {
		n++
	}
	if n == 0 {
		return nil
	}
	due := slices.Clone(f.reached[:n])
	f.reached = slices.Delete(f.reached, 0, n)
	return due
}

// whenReached runs fn once the feed's revision reaches rev: at once (on
// the caller's goroutine) if it has, else on the goroutine that makes it
// reach rev, or when the feed closes. stop unregisters fn if it has not
// run yet, so that a caller who gives up leaves nothing behind (a view
// stalled for long would otherwise collect every abandoned wait).
func (f *feed) whenReached(rev uint64, fn func()) (stop func()) {
	f.mu.Lock()
	if f.rev >= rev || f.closed != nil {
		f.mu.Unlock()
		fn()
		return func() {}
	}
	f.waiterID++
	id := f.waiterID
	i, _ := slices.BinarySearchFunc(f.reached, rev, func(w revWaiter, r uint64) int { return cmp.Compare(w.rev, r+1) })
	f.reached = slices.Insert(f.reached, i, revWaiter{rev: rev, id: id, fn: fn})
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		// The waiters of rev are together, before i or after it
		// (insertions and removals moved it).
		from, _ := slices.BinarySearchFunc(f.reached, rev, func(w revWaiter, r uint64) int { return cmp.Compare(w.rev, r) })
		for j := from; j < len(f.reached) && f.reached[j].rev == rev; j++ {
			if f.reached[j].id == id {
				f.reached = slices.Delete(f.reached, j, j+1)
				return
			}
		}
	}
}

// waitReached waits until the feed's revision reaches rev, or ctx is
// done (its wait is then unregistered).
func (f *feed) waitReached(ctx context.Context, rev uint64) error {
	ch := make(chan struct{})
	stop := f.whenReached(rev, func() { close(ch) })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// get returns the published target by name.
func (f *feed) get(name string) (*Target, bool) {
	r, ok := f.record(name)
	if !ok {
		return nil, false
	}
	return f.target(r), true
}

// record returns the record of the published target by name.
func (f *feed) record(name string) (*record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.getLocked(name)
}

// byName returns the record of every published target by name.
func (f *feed) byName() map[string]*record {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]*record, f.view.Len())
	f.view.Ascend(func(r *record) bool {
		m[r.spec.Name] = r
		return true
	})
	return m
}

// putLocked publishes r in the view and the label index. f.mu held.
func (f *feed) putLocked(r *record) {
	old, _ := f.view.ReplaceOrInsert(r)
	f.labels.replace(old, r)
}

// removeLocked drops the target named name from the view and the label index.
// f.mu held.
func (f *feed) removeLocked(name string) {
	if old, ok := f.view.Delete(named(name)); ok {
		f.labels.replace(old, nil)
	}
}

// revision returns the last published revision.
func (f *feed) revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// list returns up to limit published targets with a name greater than
// after that match selector, in name order, and whether there are more.
// The targets are made of the records outside the lock.
// With a selector it visits only the targets of the selector's rarest
// label (the label index), not the whole view.
//
// The page's Targets are allocated together: one allocation per page, not
// one per target (a caller that keeps one keeps the page's).
func (f *feed) list(o ListOptions) ([]*Target, bool) {
	records, more := f.listRecords(o)
	page := make([]Target, len(records))
	out := make([]*Target, len(records))
	for i, r := range records {
		r.fill(&page[i], f.effective)
		out[i] = &page[i]
	}
	return out, more
}

// listRecords is list's walk of the view, under the lock.
func (f *feed) listRecords(o ListOptions) ([]*record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	from := f.view
	if tr, ok := f.labels.smallest(o.Selector); ok {
		if tr == nil {
			return nil, false
		}
		from = tr
	}
	var out []*record
	more := false
	after := o.After
	if after == "" && o.Namespace != "" {
		after = o.Namespace + "/" // sorts before every name of the namespace
	}
	visit := func(t *record) bool {
		name := t.spec.Name
		if name == o.After && o.After != "" {
			return true
		}
		if o.Namespace != "" && !inNamespace(name, o.Namespace) {
			// Names of the namespace are contiguous: past them, stop.
			return name < o.Namespace+"/"
		}
		if !matchLabels(t.spec.Labels, o.Selector) || (o.Visible != nil && !o.Visible(name)) {
			return true
		}
		if len(out) == o.Limit {
			more = true
			return false
		}
		out = append(out, t)
		return true
	}
	if after == "" {
		from.Ascend(visit)
	} else {
		from.AscendGreaterOrEqual(named(after), visit)
	}
	return out, more
}

// counts returns the number of published targets by phase.
func (f *feed) counts() (active, terminating int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.Ascend(func(t *record) bool {
		if t.phase() == Terminating {
			terminating++
		} else {
			active++
		}
		return true
	})
	return active, terminating
}

// close ends every watcher with err, and runs the callbacks still
// waiting for a revision (what they wait for will not come).
func (f *feed) close(err error) {
	f.mu.Lock()
	f.closed = err
	for w := range f.synced {
		f.failLocked(w, err)
		delete(f.synced, w)
	}
	due := f.reached
	f.reached = nil
	f.mu.Unlock()
	for _, w := range due {
		w.fn()
	}
}

// compactionDue returns the revision below which the store may drop
// events (everything older than the retained history) once enough were
// dropped from memory to make a store compaction worthwhile.
func (f *feed) compactionDue(min uint64) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hist.compaction < min || f.hist.compacted == 0 {
		return 0, false
	}
	f.hist.compaction = 0
	return f.hist.compacted + 1, true
}

// defaultBound is a byte bound as Options give it: 0 means def, a
// negative value no bound (0 in the feed).
func defaultBound(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	default:
		return v
	}
}

func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// inNamespace reports whether name is in namespace ns ("NS/..."); every
// name is in the namespace "".
func inNamespace(name, ns string) bool {
	return ns == "" || (len(name) > len(ns) && name[len(ns)] == '/' && name[:len(ns)] == ns)
}
