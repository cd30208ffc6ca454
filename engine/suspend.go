package engine

import "fmt"

// Suspend says that the engine's view can no longer be vouched for:
// cluster mode calls it when the replica lost its lease (etcd may be
// unreachable, and the view may be missing what other replicas wrote).
// Every watcher ends with an error wrapping ErrSuspended that says why
// (cause), so that clients resume on another replica rather than receive
// progress notifications that repeat an old revision; Get, List and Watch
// fail with it until Resume. Probing is not its business (the cluster
// layer disowns the targets).
func (e *Engine) Suspend(cause error) {
	err := fmt.Errorf("%w: this replica cannot vouch for its view: %w; another replica can answer", ErrSuspended, cause)
	e.feed.suspend(err)
	e.log.Warn("view suspended: reads and watches refused until it is current again", "cause", cause)
}

// Resume ends a Suspend: the caller made the view current again (cluster
// mode: it rejoined and the view caught up with the join's revision).
// Without a Suspend it does nothing.
func (e *Engine) Resume() {
	if e.feed.resume() {
		e.log.Info("view current again: serving reads and watches")
	}
}

// suspend ends every synced watcher with err and refuses reads and
// watches with it (catchUp ends the others).
func (f *feed) suspend(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stale = err
	for w := range f.synced {
		f.failLocked(w, err)
		delete(f.synced, w)
	}
}

// resume clears a suspend; false if there was none.
func (f *feed) resume() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.stale != nil
	f.stale = nil
	return was
}

// vouched is the error reads fail with while suspended (nil otherwise).
func (f *feed) vouched() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stale
}
