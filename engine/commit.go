package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// committer serialises every change through the store: it takes whatever
// is pending (group commit: one transaction and one fsync for a burst),
// writes it, then publishes it to the feed, then tells waiters. So a change
// is visible to no watcher before it is durable, and all changes are
// published in the order they were submitted.
type committer struct {
	store    Store
	feed     *feed
	clock    clockwork.Clock
	onCommit func(changes []*Change, took time.Duration) // after publishing
	onLost   func(names []string)                        // called with no lock held

	mu      sync.Mutex
	pending []pendingChange // guarded by mu
	closed  error           // set once the committer stopped; guarded by mu
	wake    chan struct{}
	stats   commitStats // guarded by mu
}

type pendingChange struct {
	change *Change    // nil for a barrier
	done   chan error // nil when nobody waits
}

// commitStats count what the committer did, for metrics and benchmarks.
type commitStats struct {
	Commits uint64 // store transactions
	Changes uint64 // changes written
}

func newCommitter(store Store, f *feed, clock clockwork.Clock, onCommit func([]*Change, time.Duration), onLost func([]string)) *committer {
	return &committer{store: store, feed: f, clock: clock, onCommit: onCommit, onLost: onLost, wake: make(chan struct{}, 1)}
}

// submit queues changes as one unit (they land in the same transaction)
// and returns a channel that receives the outcome, or nil if wait is false.
func (c *committer) submit(changes []*Change, wait bool) (<-chan error, error) {
	var done chan error
	if wait {
		done = make(chan error, 1)
	}
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return nil, c.closed
	}
	for i, ch := range changes {
		p := pendingChange{change: ch}
		if i == len(changes)-1 {
			p.done = done
		}
		c.pending = append(c.pending, p)
	}
	c.mu.Unlock()
	c.signal()
	return done, nil
}

// barrier waits until every change submitted before it is durable and
// published (or failed), or ctx is done.
func (c *committer) barrier(ctx context.Context) error {
	done := make(chan error, 1)
	c.mu.Lock()
	if err := c.closed; err != nil {
		// Stopped: nothing is pending any more; a store failure is the
		// answer to what was.
		c.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	c.pending = append(c.pending, pendingChange{done: done})
	c.mu.Unlock()
	c.signal()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// notify tells the waiters of batch the outcome.
func notify(batch []pendingChange, err error) {
	for _, p := range batch {
		if p.done != nil {
			p.done <- err
		}
	}
}

// run writes pending changes until ctx is done, then flushes what is still
// pending and refuses more. A store error other than lost ownership stops
// it and is returned: the engine must not go on with state it cannot
// persist.
func (c *committer) run(ctx context.Context) error {
	for {
		stopping := false
		select {
		case <-c.wake:
		case <-ctx.Done():
			stopping = true
		}
		if stopping {
			c.mu.Lock()
			c.closed = ErrClosed
			c.mu.Unlock()
		}
		// On stop, loop until nothing is left (retries included).
		for {
			batch := c.take()
			if len(batch) == 0 {
				break
			}
			// The flush on stop must not be cancelled with ctx.
			if err := c.write(context.WithoutCancel(ctx), batch); err != nil {
				return err
			}
			if !stopping {
				break
			}
		}
		if stopping {
			return nil
		}
	}
}

// take removes and returns everything pending.
func (c *committer) take() []pendingChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	batch := c.pending
	c.pending = nil
	return batch
}

// write commits one batch and publishes it. Changes of targets whose
// ownership was lost are dropped (their waiters get the error) and the
// others are queued again; any other store error is returned.
func (c *committer) write(ctx context.Context, batch []pendingChange) error {
	changes := make([]*Change, 0, len(batch))
	for _, p := range batch {
		if p.change != nil {
			changes = append(changes, p.change)
		}
	}
	if len(changes) == 0 { // only barriers
		notify(batch, nil)
		return nil
	}
	start := c.clock.Now()
	err := c.store.Commit(ctx, changes)
	var lost *OwnershipLostError
	switch {
	case err == nil:
		took := c.clock.Since(start)
		c.feed.publish(changes)
		c.onCommit(changes, took)
		c.mu.Lock()
		c.stats.Commits++
		c.stats.Changes += uint64(len(changes))
		c.mu.Unlock()
		notify(batch, nil)
		return nil
	case errors.As(err, &lost):
		// Nothing was written. Drop the lost targets' changes and write
		// the others again.
		c.onLost(lost.Names)
		gone := make(map[string]bool, len(lost.Names))
		for _, n := range lost.Names {
			gone[n] = true
		}
		var retry []pendingChange
		for _, p := range batch {
			if p.change != nil && gone[p.change.Name] {
				notify([]pendingChange{p}, err)
			} else {
				retry = append(retry, p)
			}
		}
		if len(retry) == len(batch) {
			// None of the batch was dropped: writing it again would be
			// refused again, forever.
			notify(batch, err)
			c.fail(err)
			return err
		}
		c.mu.Lock()
		c.pending = append(retry, c.pending...)
		c.mu.Unlock()
		if len(retry) > 0 {
			c.signal()
		}
		return nil
	default:
		notify(batch, err)
		c.fail(err)
		return err
	}
}

// fail refuses further changes and fails everything pending with err.
func (c *committer) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = err
	for _, p := range c.pending {
		if p.done != nil {
			p.done <- err
		}
	}
	c.pending = nil
}

func (c *committer) snapshotStats() commitStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
