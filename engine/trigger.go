package engine

import (
	"context"
	"fmt"

	"github.com/probed/probed/engine/probe"
)

// Trigger runs one probe of a target now and returns its outcome (applied
// to the probe's state like any other) and the target after it. The run
// goes through the executor like every other: when the probe is already
// running, Trigger waits for that run instead of starting another (a probe
// never overlaps itself); when MaxInflight probes are running it fails
// with ErrResourceExhausted. The run is the engine's, not the caller's: a
// caller that gives up (ctx) does not cancel it. A probe gated behind the
// startup probe, or of a terminating target, is ErrFailedPrecondition.
func (e *Engine) Trigger(ctx context.Context, name string, typ probe.Type) (probe.Outcome, *Target, error) {
	en, err := e.acquire(ctx, name)
	if err != nil {
		return probe.Outcome{}, nil, err
	}
	r := en.runners[typ]
	switch {
	case en.spec.Probe(typ) == nil:
		en.mu.Unlock()
		return probe.Outcome{}, nil, fmt.Errorf("target %q has no %s probe: %w", name, typ, ErrNotFound)
	case en.phase() == Terminating:
		en.mu.Unlock()
		return probe.Outcome{}, nil, errTerminating(name)
	case typ != probe.Startup && !en.started():
		en.mu.Unlock()
		return probe.Outcome{}, nil, fmt.Errorf("the %s probe of target %q does not run until its startup probe has succeeded: %w", typ, name, ErrFailedPrecondition)
	case r == nil:
		en.mu.Unlock()
		return probe.Outcome{}, nil, fmt.Errorf("the %s probe of target %q is not probed by this engine: %w", typ, name, ErrFailedPrecondition)
	}
	ch, err := e.exec.triggerLocked(r)
	en.mu.Unlock()
	if err != nil {
		return probe.Outcome{}, nil, err
	}
	var res runResult
	select {
	case res = <-ch:
	case <-ctx.Done():
		return probe.Outcome{}, nil, ctx.Err()
	}
	if res.done != nil {
		// Return the target as this outcome left it.
		if err := wait(ctx, res.done); err != nil {
			return res.out, nil, err
		}
	}
	t, err := e.getOwned(ctx, name)
	return res.out, t, err
}
