package engine

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// feed is the published side of the engine: the targets as of the last
// published revision (the view), the retained history, and the watchers.
// Everything in it changes only in publish, after the store made the
// changes durable, and under one lock, so a snapshot of the view is exactly
// the state at its revision.
type feed struct {
	mu      sync.Mutex
	rev     uint64                 // last published revision; guarded by mu
	view    *btree.BTreeG[*Target] // by name; guarded by mu
	hist    history                // guarded by mu
	synced  map[*Watcher]struct{}  // watchers that receive pushes; guarded by mu
	closed  error                  // set by close; guarded by mu
	watched int                    // open watchers; guarded by mu
	onEvict func()                 // a watcher was ended as too slow; set before use
	// maxWatchers limits watched (0: no limit); set before use.
	maxWatchers int
	// watcherBytes and totalBytes bound the (estimated) bytes of events
	// pending in one watcher's queue and in all of them (0: no bound);
	// set before use.
	watcherBytes, totalBytes int
	// queued is the bytes pending in every watcher's queue: added by
	// publish (under mu), taken by Next and Close (under the watcher's
	// lock only), hence atomic.
	queued atomic.Int64
}

func byName(a, b *Target) bool { return a.Spec.Name < b.Spec.Name }

func newFeed(historyCount, historyBytes int) *feed {
	return &feed{
		view:   btree.NewG(32, byName),
		hist:   newHistory(historyCount, historyBytes),
		synced: make(map[*Watcher]struct{}),
	}
}

// restore loads stored state; called before anything is published.
func (f *feed) restore(st *Stored) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range st.Targets {
		f.view.ReplaceOrInsert(t)
	}
	f.hist.compacted = st.Compacted
	// Events the bounds drop here are still in the store: they count
	// towards the next compaction.
	for _, ev := range st.Events {
		f.hist.append(ev)
	}
	f.rev = st.Revision
}

// publish makes durable changes visible: the view, the history and every
// synced watcher. It never blocks on a watcher.
func (f *feed) publish(changes []*Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range changes {
		if c.Delete {
			f.view.Delete(&Target{Spec: c.Target.Spec})
		} else {
			f.view.ReplaceOrInsert(c.Target)
		}
		f.hist.append(c.Event)
		f.rev = c.Event.Revision
		size := c.Event.size()
		for w := range f.synced {
			if !w.pushLocked(&c.Event, size) {
				f.evictedLocked(w)
			}
		}
		f.trimLocked()
	}
	for w := range f.synced {
		w.advanceLocked(f.rev)
	}
}

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
		slowest.failSlow(fmt.Sprintf("the slowest watcher when more than %d bytes of events were pending in all watchers (--watch-total-bytes)", f.totalBytes))
		f.evictedLocked(slowest)
	}
}

// get returns the published target by name.
func (f *feed) get(name string) (*Target, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view.Get(&Target{Spec: nameOnly(name)})
}

// forget drops a target from the view without an event: its ownership
// was lost, so this engine reports it no more (its history stays).
func (f *feed) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.Delete(&Target{Spec: nameOnly(name)})
}

// revision returns the last published revision.
func (f *feed) revision() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// list returns up to limit published targets with a name greater than
// after that match selector, in name order, and whether there are more.
func (f *feed) list(after string, limit int, selector map[string]string) ([]*Target, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Target
	more := false
	visit := func(t *Target) bool {
		if t.Spec.Name == after && after != "" {
			return true
		}
		if !matchLabels(t.Spec.Labels, selector) {
			return true
		}
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, t)
		return true
	}
	if after == "" {
		f.view.Ascend(visit)
	} else {
		f.view.AscendGreaterOrEqual(&Target{Spec: nameOnly(after)}, visit)
	}
	return out, more
}

// counts returns the number of published targets by phase.
func (f *feed) counts() (active, terminating int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.Ascend(func(t *Target) bool {
		if t.Status.Phase == Terminating {
			terminating++
		} else {
			active++
		}
		return true
	})
	return active, terminating
}

// close ends every watcher with err.
func (f *feed) close(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = err
	for w := range f.synced {
		w.failLocked(err)
		delete(f.synced, w)
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
