package engine

import (
	"context"
	"time"
)

// compactEvery is how often the store's history is trimmed.
const compactEvery = 10 * time.Second

// compactLoop trims the store's history to what memory retains: once at
// start, so that a process restarting faster than the interval (a crash
// loop) still trims what its predecessors left, and then every interval.
func (e *Engine) compactLoop(ctx context.Context) {
	t := e.clock.NewTicker(compactEvery)
	defer t.Stop()
	for {
		e.compactIfDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// compactIfDue compacts the store when enough events have left memory.
func (e *Engine) compactIfDue(ctx context.Context) {
	const minDropped = 1024
	if before, ok := e.feed.compactionDue(minDropped); ok {
		if err := e.opts.Store.Compact(ctx, before); err != nil && ctx.Err() == nil {
			e.log.Error("compacting history", "before", before, "err", err)
		}
	}
}
