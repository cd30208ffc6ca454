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
	mu      sync.Mutex
	pending []pendingChange // guarded by mu
	closed  error           // set once the committer stopped; guarded by mu
	wake    chan struct{}
	stats   commitStats // guarded by mu
}

type pendingChange struct {
	change *Change
	done   chan error // nil when nobody waits
}

// commitStats count what the committer did, for metrics and benchmarks.
type commitStats struct {
	Commits uint64 // store transactions
	Changes uint64 // changes written
}

func newCommitter() *committer {
	return &committer{wake: make(chan struct{}, 1)}
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

func (c *committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// finish tells the waiters of batch the outcome.
func finish(batch []pendingChange, err error) {
	for _, p := range batch {
		if p.done != nil {
			p.done <- err
		}
	}
}

// commit submits changes and waits until they are durable and published.
func (c *committer) commit(ctx context.Context, changes ...*Change) error {
	done, err := c.submit(changes, true)
	if err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The changes still land; the caller just stops waiting.
		return ctx.Err()
	}
}

// run writes pending changes until ctx is done, then flushes what is still
// pending and refuses more. A store error other than lost ownership stops
// it and is returned: the engine must not go on with state it cannot
// persist. onLost is called (with no lock held) with the names of targets
// whose ownership was lost.
func (c *committer) run(ctx context.Context, store Store, f *feed, clock clockwork.Clock,
	onCommit func(changes int, took time.Duration), onLost func([]string),
) error {
	var batch []pendingChange
	var changes []*Change
	for {
		select {
		case <-c.wake:
		case <-ctx.Done():
		}
		stopping := ctx.Err() != nil
		c.mu.Lock()
		batch, c.pending = c.pending, batch[:0]
		if stopping {
			c.closed = ErrClosed
		}
		c.mu.Unlock()
		if len(batch) > 0 {
			changes = changes[:0]
			for _, p := range batch {
				changes = append(changes, p.change)
			}
			// The flush on stop must not be cancelled with ctx.
			start := clock.Now()
			err := store.Commit(context.WithoutCancel(ctx), changes)
			if err == nil {
				onCommit(len(changes), clock.Since(start))
			}
			var lost *OwnershipLostError
			switch {
			case err == nil:
				f.publish(changes)
				c.mu.Lock()
				c.stats.Commits++
				c.stats.Changes += uint64(len(changes))
				c.mu.Unlock()
				finish(batch, nil)
			case errors.As(err, &lost):
				// Nothing was written. Drop the lost targets' changes and
				// write the others again.
				onLost(lost.Names)
				gone := make(map[string]bool, len(lost.Names))
				for _, n := range lost.Names {
					gone[n] = true
				}
				var retry []pendingChange
				for _, p := range batch {
					if gone[p.change.Name] {
						finish([]pendingChange{p}, err)
					} else {
						retry = append(retry, p)
					}
				}
				c.mu.Lock()
				c.pending = append(retry, c.pending...)
				c.mu.Unlock()
				if len(retry) > 0 {
					c.signal()
				}
			default:
				finish(batch, err)
				c.fail(err)
				return err
			}
			clear(batch)
		}
		if stopping {
			return nil
		}
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
