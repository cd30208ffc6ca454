package engine

import (
	"context"
	"fmt"

	"github.com/probed/probed/engine/probe"
)

// Trigger runs one probe of a target now and returns its outcome (applied
// to the probe's state like any other) and the target after it. When the
// probe is already running, Trigger waits for that run instead of starting
// another: a probe never overlaps itself. A probe gated behind the startup
// probe, or of a terminating target, is ErrFailedPrecondition.
func (e *Engine) Trigger(ctx context.Context, name string, typ probe.Type) (probe.Outcome, *Target, error) {
	en, err := e.acquire(ctx, name)
	if err != nil {
		return probe.Outcome{}, nil, err
	}
	r := en.runners[typ]
	switch {
	case r == nil:
		en.mu.Unlock()
		return probe.Outcome{}, nil, fmt.Errorf("target %q has no %s probe: %w", name, typ, ErrNotFound)
	case en.status.Phase == Terminating:
		en.mu.Unlock()
		return probe.Outcome{}, nil, errTerminating(name)
	case typ != probe.Startup && !en.status.Started():
		en.mu.Unlock()
		return probe.Outcome{}, nil, fmt.Errorf("the %s probe of target %q does not run until its startup probe has succeeded: %w", typ, name, ErrFailedPrecondition)
	}
	var out probe.Outcome
	if r.running.CompareAndSwap(false, true) {
		checker, timeout, gen := r.checker, r.eff.Timeout, r.gen.Load()
		en.mu.Unlock()
		start := e.clock.Now()
		out = e.check(ctx, r, checker, timeout)
		if done := e.finish(ctx, r, gen, start, out); done != nil {
			// Return the target as this outcome left it.
			if err := wait(ctx, done); err != nil {
				return out, nil, err
			}
		}
	} else {
		ch := make(chan probe.Outcome, 1)
		r.waiters = append(r.waiters, ch)
		en.mu.Unlock()
		select {
		case out = <-ch:
		case <-ctx.Done():
			return probe.Outcome{}, nil, ctx.Err()
		}
	}
	t, err := e.Get(ctx, name)
	return out, t, err
}

// Watch opens a watcher (see WatchOptions and Watcher.Next). A Since older
// than the retained history is a *CompactedError.
func (e *Engine) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	if err := e.awaitRunning(ctx); err != nil {
		return nil, err
	}
	return e.feed.watch(o, e.opts.WatchBuffer)
}
