package engine

import (
	"context"
	"fmt"
)

// Over a SharedStore the view can fall behind the store's history: a
// replica cut off from etcd while etcd compacted the revisions it had not
// read yet (etcd's --auto-compaction-*, or another replica's Compact).
// The engine then reloads in place rather than stop: it keeps serving and
// keeps probing what it owns; only the watchers whose next revision is
// gone end, with ErrCompacted naming the oldest revision retained.

// reload makes the view, the history and the registry the store's again
// (a Load), after the follow from revision after failed with cause (an
// ErrCompacted), and returns the revision to follow from.
func (e *Engine) reload(ctx context.Context, after uint64, cause error) (uint64, error) {
	st, err := e.opts.Store.Load(ctx)
	if err != nil {
		return 0, fmt.Errorf("reloading after %v: %w", cause, err)
	}
	ended, due := e.feed.reload(st)
	for _, w := range due {
		w.fn()
	}
	loaded := make(map[string]*Target, len(st.Targets))
	for _, t := range st.Targets {
		loaded[t.Spec.Name] = t
	}
	type update struct {
		en *entry
		t  *Target
	}
	var gone, added []*entry
	var updated []update
	e.mu.Lock()
	for name, en := range e.targets {
		if _, ok := loaded[name]; !ok {
			delete(e.targets, name)
			e.countClientLocked(en.client, -1)
			gone = append(gone, en)
		}
	}
	for name, t := range loaded {
		en := e.targets[name]
		if en == nil {
			en = &entry{name: name, client: t.Status.Client}
			en.share(t)
			e.targets[name] = en
			e.countClientLocked(en.client, 1)
			added = append(added, en)
			continue
		}
		updated = append(updated, update{en, t})
	}
	e.mu.Unlock()
	for _, en := range gone {
		en.mu.Lock()
		e.disownLocked(en, nil)
		en.removed = true
		en.mu.Unlock()
	}
	for _, u := range updated {
		u.en.mu.Lock()
		if !u.en.owned {
			u.en.share(u.t) // the owner's state; an owned one is ahead
		}
		u.en.mu.Unlock()
	}
	for _, en := range added {
		if e.owns(en.name) {
			e.ownEntry(en, true)
		}
	}
	e.log.Warn("the view fell behind the store's compacted history; reloaded in place (the events in between are lost)",
		"cause", cause, "followed_up_to", after, "reloaded_at", st.Revision, "oldest_retained", st.Compacted+1,
		"targets", len(st.Targets), "added", len(added), "removed", len(gone), "watchers_ended", ended)
	return st.Revision, nil
}

// reload replaces the view and the history with st's. Every synced
// watcher is at the old revision, before what st's history keeps: it ends
// with a *CompactedError naming the oldest retained revision. It returns
// how many ended and the callbacks due (run them with no lock held).
func (f *feed) reload(st *Stored) (int, []revWaiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.Clear(false)
	for _, t := range st.Targets {
		f.view.ReplaceOrInsert(t)
	}
	hist := newHistory(f.hist.maxCount, f.hist.maxBytes)
	hist.compacted = max(st.Compacted, f.rev)
	for _, ev := range st.Events {
		if ev.Revision > hist.compacted {
			hist.append(ev)
		}
	}
	f.hist = hist
	f.rev = max(f.rev, st.Revision)
	oldest := f.hist.oldest(f.rev + 1)
	ended := 0
	for w := range f.synced {
		w.failLocked(&CompactedError{Requested: w.rev + 1, Oldest: oldest})
		delete(f.synced, w)
		ended++
	}
	return ended, f.dueLocked()
}
