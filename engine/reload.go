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
		return 0, fmt.Errorf("reloading (%s): %w", cause.Error(), err)
	}
	ended, rewound, due, records := e.feed.reload(st)
	for _, w := range due {
		w.fn()
	}
	owned := st.Ownership
	if owned == nil {
		owned = everything
	}
	loaded := make(map[string]*record, len(records))
	for _, r := range records {
		loaded[r.name()] = r
	}
	var gone, added []*entry
	e.own.Lock()
	e.mu.Lock()
	for name, en := range e.targets {
		if _, ok := loaded[name]; !ok {
			delete(e.targets, name)
			e.countClientLocked(en.client, -1)
			gone = append(gone, en)
		}
	}
	for name, r := range loaded {
		en := e.targets[name]
		if en == nil {
			en = &entry{name: name, client: e.countClientLocked(r.client, 1), shard: e.owned.shard(name)}
			en.shareLocked(r)
			e.targets[name] = en
			added = append(added, en)
			continue
		}
		en.mu.Lock()
		if !en.owned {
			en.shareLocked(r) // the owner's state; an owned one is ahead
		}
		en.mu.Unlock()
	}
	e.mu.Unlock()
	for _, en := range gone {
		en.mu.Lock()
		e.disownLocked(en, nil)
		en.removed = true
		en.mu.Unlock()
	}
	// The ownership as of the Load: what the log said in between is lost
	// with it. A release whose shard is no longer owned has ended.
	for s := range e.releasing {
		if s >= len(owned.Owned) || !owned.Owned[s] {
			e.releasing[s] = false
		}
	}
	e.owned = owned
	if len(e.releasing) != len(owned.Owned) {
		e.releasing = make([]bool, len(owned.Owned))
	}
	e.reconcileLocked(func(en *entry) bool {
		en.shard = owned.shard(en.name)
		return true
	})
	e.own.Unlock()
	msg := "the view fell behind the store's compacted history; reloaded in place (the events in between are lost)"
	if rewound {
		msg = "the store went back in time (restored from a backup?); reloaded in place: what it no longer has is lost"
	}
	e.log.Warn(msg, "cause", cause, "followed_up_to", after, "reloaded_at", st.Revision, "oldest_retained", st.Compacted+1,
		"targets", len(st.Targets), "added", len(added), "removed", len(gone), "removed_targets", names(gone), "watchers_ended", ended)
	return st.Revision, nil
}

// reload replaces the view and the history with st's. Every synced
// watcher is at the old revision, before what st's history keeps (or in
// a history the store lost): it ends with a *CompactedError naming the
// oldest retained revision, and so does every watcher still catching up
// (epoch). When st is behind what was published (the store went back in
// time: rewound), the revision goes back to st's, and a watch from a
// revision in between is refused from now on. It returns how many
// watchers ended, the callbacks due (run them with no lock held) and the
// records of st's targets, as the view holds them.
func (f *feed) reload(st *Stored) (ended int, rewound bool, due []revWaiter, records []*record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view.Clear(false)
	f.labels = newLabelIndex()
	records = make([]*record, 0, len(st.Targets))
	for _, t := range st.Targets {
		r := newRecord(t)
		f.putLocked(r)
		records = append(records, r)
	}
	hist := newHistory(f.hist.maxCount, f.hist.maxBytes)
	hist.compacted = max(st.Compacted, f.rev)
	if rewound = st.Revision < f.rev; rewound {
		hist.compacted = st.Compacted
		f.lostAfter, f.lostUpTo = st.Revision, max(f.lostUpTo, f.rev)
		f.rev = st.Revision
	}
	for _, ev := range st.Events {
		if ev.Revision > hist.compacted {
			f.restoreEventLocked(&hist, ev)
		}
	}
	f.hist = hist
	f.rev = max(f.rev, st.Revision)
	f.epoch++
	oldest := f.hist.oldest(f.rev + 1)
	for w := range f.synced {
		f.failLocked(w, &CompactedError{Requested: w.rev + 1, Oldest: oldest})
		delete(f.synced, w)
		ended++
	}
	return ended, rewound, f.dueLocked(), records
}

// names are the entries' names, at most 20 of them (for a log line).
func names(entries []*entry) []string {
	out := make([]string, 0, min(len(entries), 20))
	for _, en := range entries[:min(len(entries), 20)] {
		out = append(out, en.name)
	}
	return out
}

// Reload makes the view the store's again, in place, as after a
// compaction: the registry, the view and the history are Loaded again and
// the follow goes on from there. The caller found that the store went back
// in time (an etcd restored from a backup: its revision is below what the
// view published, and the follow waits for revisions that will carry
// other changes): the revision goes back, every watcher ends with
// ErrCompacted, a watch from a lost revision is refused, and the targets
// the store no longer has are forgotten (logged).
func (e *Engine) Reload(ctx context.Context) error {
	if err := e.awaitRunning(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	select {
	case e.reloads <- done:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.done:
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
