package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// WatchOptions select what a watcher receives.
type WatchOptions struct {
	// Since 0 starts with a snapshot of the current state; N > 0 replays
	// every retained event with revision >= N first.
	Since uint64
	// Names, when not empty, limits events to these targets.
	Names []string
	// Selector limits events to targets whose labels include all of it.
	Selector map[string]string
	// Kinds, when not empty, limits events to these kinds (snapshots are
	// always sent).
	Kinds []EventKind
	// Namespace, when set, limits events to the targets named
	// "Namespace/...".
	Namespace string
	// Visible, when set, limits events (snapshot, replay and live) to the
	// targets it returns true for (the caller's read permission). It is
	// called with the feed's lock held: it must be fast and must not call
	// the engine.
	Visible func(name string) bool
	// Buffer is how many live events may wait for the client before the
	// watcher is ended as too slow; 0 means the engine's default.
	Buffer int
}

// Batch is what Watcher.Next returns: events in revision order.
type Batch struct {
	Events []Event
	// Snapshot: the events are part of the initial snapshot;
	// SnapshotComplete marks its last batch.
	Snapshot         bool
	SnapshotComplete bool
	// Revision: every event up to it has been returned or filtered out. A
	// snapshot is consistent at it.
	Revision uint64
}

// Batch sizes of Next.
const (
	maxBatch         = 1000
	maxSnapshotBatch = 256
)

// Watcher is one client's stream of events. It is not safe for concurrent
// use by several goroutines, except Close and Progress. The caller must
// Close it (or cancel the engine) to release it.
type Watcher struct {
	f      *feed
	filter watchFilter
	max    int
	client string // the identity it counts for in f.watchedBy ("": none)

	// Snapshot and catch-up state, used only by the goroutine calling Next.
	snapshot []*record
	snapRev  uint64
	snapOpen bool   // snapshot batches remain (possibly zero targets)
	cursor   uint64 // next revision to read from history while not synced
	from     uint64 // events below it are never delivered
	spare    []Event
	// spareRecs is the history's records read with spare.
	spareRecs []*record
	epoch     uint64 // f.epoch when it was created: a reload since ends it

	mu     sync.Mutex // guards the fields below
	synced bool       // receives pushes; also in f.synced
	queue  []Event
	// partial: a publish is queueing its events; Next waits for its end,
	// so a batch never holds part of one delivery (a deleted target's
	// readiness FAILURE without its TERMINATING: an xDS consumer would
	// send UNHEALTHY before DRAINING) unless the delivery fills half the
	// buffer (takeLocked).
	partial    bool
	queueBytes int    // estimated bytes of queue, counted in f.queued
	heldBytes  int    // estimated bytes of filter, counted in f.queued until the watcher ends
	rev        uint64 // everything up to rev was queued, returned or filtered out
	lastSent   uint64 // revision of the last event returned by Next
	err        error  // terminal
	closed     bool
	wake       chan struct{}
}

type watchFilter struct {
	names     map[string]struct{}
	selector  map[string]string
	kinds     map[EventKind]struct{}
	namespace string
	visible   func(name string) bool
}

func newWatchFilter(o WatchOptions) watchFilter {
	var f watchFilter
	if len(o.Names) > 0 {
		f.names = make(map[string]struct{}, len(o.Names))
		for _, n := range o.Names {
			f.names[n] = struct{}{}
		}
	}
	if len(o.Selector) > 0 {
		f.selector = o.Selector
	}
	f.namespace, f.visible = o.Namespace, o.Visible
	if len(o.Kinds) > 0 {
		f.kinds = make(map[EventKind]struct{}, len(o.Kinds))
		for _, k := range o.Kinds {
			f.kinds[k] = struct{}{}
		}
	}
	return f
}

// bytes estimates the memory the filter holds: its name set, its label
// selector and its kind set (map entries with their strings).
func (f *watchFilter) bytes() int {
	n := 16 * len(f.kinds)
	for name := range f.names {
		n += len(name) + 48
	}
	for k, v := range f.selector {
		n += len(k) + len(v) + 64
	}
	return n
}

func (f *watchFilter) matchTarget(name string, labels map[string]string) bool {
	if !inNamespace(name, f.namespace) || (f.visible != nil && !f.visible(name)) {
		return false
	}
	if f.names != nil {
		if _, ok := f.names[name]; !ok {
			return false
		}
	}
	return matchLabels(labels, f.selector)
}

func (f *watchFilter) match(ev *Event) bool {
	if f.kinds != nil {
		if _, ok := f.kinds[ev.Kind]; !ok {
			return false
		}
	}
	return f.matchTarget(ev.Name, ev.Labels)
}

// Watch opens a watcher (see WatchOptions and Watcher.Next). A Since older
// than the retained history is a *CompactedError.
func (e *Engine) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	// Its snapshot would be an answer about every target: from a view
	// this replica can vouch for only (a suspension ends the watchers
	// already open).
	if err := e.vouchView(); err != nil {
		return nil, err
	}
	return e.feed.watch(o, e.opts.WatchBuffer, ClientFrom(ctx))
}

// watch registers a watcher for client (an identity, or ""). A Since older
// than the retained history is a *CompactedError.
func (f *feed) watch(o WatchOptions, buffer int, client string) (*Watcher, error) {
	w := &Watcher{f: f, filter: newWatchFilter(o), max: buffer, client: client, wake: make(chan struct{}, 1)}
	if o.Buffer > 0 {
		w.max = o.Buffer
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed != nil {
		return nil, f.closed
	}
	if f.stale != nil {
		return nil, f.stale
	}
	if o.Since > f.lostAfter+1 && o.Since <= f.lostUpTo+1 {
		// It saw revisions of a history the store no longer has.
		return nil, &CompactedError{Requested: o.Since, Oldest: f.hist.oldest(f.rev + 1)}
	}
	w.epoch = f.epoch
	if f.maxWatchers > 0 && f.watched >= f.maxWatchers {
		return nil, fmt.Errorf("at most %d watchers may be open at once (--max-watchers): %w", f.maxWatchers, ErrResourceExhausted)
	}
	if limit := f.maxWatchersPerClient; limit > 0 && client != "" && f.watchedBy[client] >= limit {
		return nil, fmt.Errorf("%q already has %d watchers open, the most one client may have (--max-watchers-per-client): %w", client, limit, ErrResourceExhausted)
	}
	if o.Since == 0 {
		f.view.Ascend(func(t *record) bool {
			if w.filter.matchTarget(t.spec.Name, t.spec.Labels) {
				w.snapshot = append(w.snapshot, t)
			}
			return true
		})
		w.snapOpen = true
		w.snapRev = f.rev
		w.cursor = f.rev + 1
	} else {
		if o.Since <= f.hist.compacted {
			return nil, &CompactedError{Requested: o.Since, Oldest: f.hist.oldest(f.rev + 1)}
		}
		w.cursor = o.Since
	}
	w.from = w.cursor
	// Nothing before the cursor is for this watcher; a cursor in the future
	// (a client that saw revisions this engine has not reached) must not
	// make Progress claim more than what exists.
	w.rev = min(w.cursor-1, f.rev)
	w.lastSent = w.rev
	f.watched++
	if client != "" {
		f.watchedBy[client]++
	}
	// What the watcher holds counts towards the bytes of watchers until it
	// ends; past the total, the slowest are ended, as when events pile up.
	w.heldBytes = w.filter.bytes()
	f.queued.Add(int64(w.heldBytes))
	f.trimLocked()
	return w, nil
}

// Next blocks until events are available and returns them: first the
// snapshot (Since 0) or the retained history (Since > 0), then live
// events, with no gap and no duplicate at the seam. It fails with a
// *SlowWatcherError when the client fell too far behind, ErrClosed when
// the engine stops, or ctx's error. The returned slice is valid until the
// next call.
func (w *Watcher) Next(ctx context.Context) (Batch, error) {
	if w.snapOpen {
		return w.nextSnapshot(), nil
	}
	for !w.isSynced() {
		b, err := w.catchUp()
		if err != nil || len(b.Events) > 0 {
			return b, err
		}
	}
	for {
		w.mu.Lock()
		b, ok := w.takeLocked()
		if ok {
			w.mu.Unlock()
			return b, nil
		}
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return Batch{}, err
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		}
	}
}

// takeLocked takes the queued events as a batch, if there are any and
// no publish is still adding to them (a batch holds whole deliveries), or
// if they are half the watcher's buffer already: a delivery that large
// (an apply of thousands of targets in one transaction) is taken in parts
// as it is queued, so that it does not fail the watcher as too slow by
// its size alone; w.mu held.
func (w *Watcher) takeLocked() (Batch, bool) {
	if len(w.queue) == 0 || w.partial && len(w.queue) < w.partialLimit() {
		return Batch{}, false
	}
	b := Batch{Events: w.queue, Revision: w.rev}
	w.queue, w.spare = w.spare[:0], w.queue
	w.dropQueueBytesLocked()
	w.lastSent = b.Events[len(b.Events)-1].Revision
	return b, true
}

func (w *Watcher) nextSnapshot() Batch {
	n := min(len(w.snapshot), maxSnapshotBatch)
	b := Batch{Events: w.spare[:0], Snapshot: true, Revision: w.snapRev}
	for _, t := range w.snapshot[:n] {
		b.Events = append(b.Events, snapshotEvent(w.f.target(t)))
	}
	w.spare = b.Events
	clear(w.snapshot[:n])
	w.snapshot = w.snapshot[n:]
	if len(w.snapshot) == 0 {
		w.snapOpen = false
		w.snapshot = nil
		b.SnapshotComplete = true
	}
	return b
}

func snapshotEvent(t *Target) Event {
	return Event{
		Revision: t.Status.Revision,
		Name:     t.Spec.Name,
		Kind:     KindSnapshot,
		Started:  t.Status.Started(),
		Ready:    t.Status.Ready(),
		Live:     t.Status.Live(),
		Labels:   t.Spec.Labels,
		Target:   t,
	}
}

func (w *Watcher) isSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced || w.err != nil
}

// catchUp reads the next events from history; when history has nothing
// newer it registers the watcher for pushes, under the feed's lock, so no
// event falls between the two.
func (w *Watcher) catchUp() (Batch, error) {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed != nil {
		return Batch{}, f.closed
	}
	if f.stale != nil {
		return Batch{}, f.stale
	}
	if w.epoch != f.epoch {
		// The view was reloaded (reload.go) while it caught up.
		return Batch{}, &CompactedError{Requested: w.cursor, Oldest: f.hist.oldest(f.rev + 1)}
	}
	if w.cursor <= f.hist.compacted {
		// History moved past us while we were catching up.
		return Batch{}, &SlowWatcherError{LastRevision: w.lastSent, Buffer: w.max,
			Exceeded: "the retained history (--history, --history-bytes) dropped events before it read them"}
	}
	read, recs, more := f.hist.readWhole(w.spare[:0], w.spareRecs[:0], w.cursor, maxBatch)
	b := Batch{Events: read[:0]}
	for i := range read {
		if w.filter.match(&read[i]) {
			ev := read[i]
			if recs[i] != nil {
				ev.Target = f.target(recs[i])
			}
			b.Events = append(b.Events, ev)
		}
	}
	w.spare = b.Events
	clear(recs)
	w.spareRecs = recs
	if len(read) > 0 {
		last := read[len(read)-1].Revision
		w.cursor = last + 1
		b.Revision = last
	}
	if !more {
		// Caught up with everything published.
		w.mu.Lock()
		w.synced = true
		w.rev = max(w.rev, f.rev, b.Revision)
		b.Revision = w.rev
		w.mu.Unlock()
		f.synced[w] = struct{}{}
	}
	w.mu.Lock()
	if len(b.Events) > 0 {
		w.lastSent = b.Events[len(b.Events)-1].Revision
	}
	w.mu.Unlock()
	return b, nil
}

// pushLocked queues ev, of estimated size bytes, for w if it matches; f.mu
// held (w.mu is taken). It reports false when the watcher must leave the
// synced set (too slow or failed): its queue would pass its bound of
// events or of bytes (f.watcherBytes).
func (f *feed) pushLocked(w *Watcher, ev *Event, size int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false
	}
	if ev.Revision < w.from || !w.filter.match(ev) {
		return true
	}
	// Everything up to ev is now queued or filtered.
	w.rev = max(w.rev, ev.Revision)
	switch limit := f.watcherBytes; {
	case len(w.queue) >= w.max:
		w.failSlowLocked("")
		return false
	case limit > 0 && w.heldBytes+w.queueBytes+size > limit:
		w.failSlowLocked(fmt.Sprintf("more than %d bytes of events pending (--watch-buffer-bytes)", limit))
		return false
	}
	w.queue = append(w.queue, *ev)
	w.queueBytes += size
	f.queued.Add(int64(size))
	// Next is woken when the publish ends (advanceLocked), or once the
	// delivery is too large to wait for (takeLocked).
	w.partial = true
	if len(w.queue) == w.partialLimit() {
		w.signal()
	}
	return true
}

// partialLimit is the number of queued events of an unfinished publish
// that Next takes without waiting for its end: half the buffer.
func (w *Watcher) partialLimit() int { return max(w.max/2, 1) }

// failSlowLocked ends w as too slow, for having passed the bound exceeded
// describes; f.mu held (w.mu is taken).
func (f *feed) failSlowLocked(w *Watcher, exceeded string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failSlowLocked(exceeded)
}

// failSlowLocked is failSlow with w.mu held: the queue is dropped (the
// client resumes from its last revision and replays it from history).
func (w *Watcher) failSlowLocked(exceeded string) {
	if w.err == nil {
		w.err = &SlowWatcherError{LastRevision: w.lastSent, Buffer: w.max, Exceeded: exceeded}
	}
	w.queue = nil
	w.dropQueueBytesLocked()
	w.dropHeldBytesLocked()
	w.signal()
}

// dropQueueBytesLocked uncounts the queue's bytes (it was taken or dropped);
// w.mu held.
func (w *Watcher) dropQueueBytesLocked() {
	w.f.queued.Add(-int64(w.queueBytes))
	w.queueBytes = 0
}

// dropHeldBytesLocked uncounts what the filter holds (the watcher ended); w.mu
// held.
func (w *Watcher) dropHeldBytesLocked() {
	w.f.queued.Add(-int64(w.heldBytes))
	w.heldBytes = 0
}

// pendingBytes returns the estimated bytes of events queued for w, and of
// what its filter holds.
func (w *Watcher) pendingBytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queueBytes + w.heldBytes
}

// advanceLocked records that w has seen everything up to rev, and ends
// the publish that queued its events (Next may take them now); f.mu held
// (w.mu is taken).
func (f *feed) advanceLocked(w *Watcher, rev uint64) {
	w.mu.Lock()
	w.rev = max(w.rev, rev)
	if w.partial {
		w.partial = false
		w.signal()
	}
	w.mu.Unlock()
}

// failLocked ends w with err; f.mu held (w.mu is taken).
func (f *feed) failLocked(w *Watcher, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	w.signal()
}

func (w *Watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Progress returns the revision up to which the watcher has been given
// every event (or filtered it out), for progress notifications on an idle
// stream; while events are pending it is the last one returned.
func (w *Watcher) Progress() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced || len(w.queue) > 0 {
		return w.lastSent
	}
	return w.rev
}

// PendingWatchBytes returns the estimated bytes of events waiting in the
// queues of every watcher, and of what their filters (names, label
// selectors) hold: at most Options.WatchTotalBytes (plus one event or one
// filter).
func (e *Engine) PendingWatchBytes() int64 { return e.feed.queued.Load() }

// Close releases the watcher. Next must not be called afterwards.
func (w *Watcher) Close() {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.synced, w)
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		f.watched--
		if w.client != "" {
			if f.watchedBy[w.client]--; f.watchedBy[w.client] == 0 {
				delete(f.watchedBy, w.client)
			}
		}
	}
	if w.err == nil {
		w.err = ErrClosed
	}
	w.queue = nil
	w.dropQueueBytesLocked()
	w.dropHeldBytesLocked()
	w.mu.Unlock()
	w.snapshot = slices.Delete(w.snapshot, 0, len(w.snapshot))
}
