package engine

import (
	"fmt"
	"sync"
	"time"
)

// stallSample is the store revision the caller of Stalled knew of, and
// when: the view must reach it within the bound.
type stallSample struct {
	mu    sync.Mutex
	known uint64    // guarded by mu
	at    time.Time // guarded by mu
}

// Stalled reports, as an error saying why, that the engine is alive but
// not getting its work done (nil otherwise); cluster mode renews its lease
// only while it is nil, so a replica that cannot write what it finds, or
// whose view no longer follows the store, gives its targets up to another
// (consul-esm#53). The scheduler's own progress is Heartbeat's business.
//
//   - A store write has been in progress for more than bound (the
//     oldest of those in flight).
//   - The view has not reached, within bound, revision known of the
//     store (over a SharedStore: the newest revision the caller has seen
//     there; 0: not checked, and the sample is dropped). The revision known at one call is the
//     sample later calls check, until the view has reached it: a view
//     that follows a busy store a little behind is no stall.
func (e *Engine) Stalled(bound time.Duration, known uint64) error {
	now := e.clock.Now()
	if since := e.commits.writing.Load(); since != 0 {
		if took := now.Sub(time.Unix(0, since)); took > bound {
			return fmt.Errorf("a store write has been in progress for %v (more than %v)", took.Round(time.Millisecond), bound)
		}
	}
	s := &e.stall
	s.mu.Lock()
	defer s.mu.Unlock()
	if known == 0 {
		s.known = 0 // a later known starts afresh
		return nil
	}
	if rev := e.feed.revision(); s.known != 0 && rev < s.known {
		if waited := now.Sub(s.at); waited >= bound {
			return fmt.Errorf("the view has not reached revision %d of the store in %v (it is at %d)", s.known, waited.Round(time.Millisecond), rev)
		}
		return nil // not reached yet: keep the sample
	}
	s.known, s.at = known, now // the previous one was reached
	return nil
}
