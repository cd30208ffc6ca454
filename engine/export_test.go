package engine

import "context"

// Flush waits until every change submitted so far is durable and
// published, or failed (the committer's barrier, which Release waits for
// too), or ctx is done.
func (e *Engine) Flush(ctx context.Context) error { return e.commits.barrier(ctx) }

// Pending is the number of events queued in w that Next has not returned.
func (w *Watcher) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
