package engine

import (
	"context"
	"errors"
	"fmt"
)

// The engine's view follows the store: every commit, its own included, is
// published as the store's Follow delivers it — the one path by which
// changes become visible. Over a SharedStore (cluster mode) the registry
// of targets follows too — a target another replica created becomes known
// here (and owned, when Options.Owns says so), one deleted anywhere is
// forgotten.

// follow publishes what the store delivers, from revision after,
// until ctx is done. When the store compacted revisions the view had not
// reached, or Reload asks, it reloads in place (reload.go) and follows on.
// An error means the view can no longer follow the store: the engine
// stops.
func (e *Engine) follow(ctx context.Context, after uint64) error {
	for {
		asked, err := e.followUntilReload(ctx, after)
		if ctx.Err() != nil {
			if asked != nil {
				asked <- ErrClosed
			}
			return nil
		}
		var cause error
		switch {
		case asked != nil:
			cause = errors.New("asked to (Reload)")
		case err == nil:
			return nil
		case errors.Is(err, ErrCompacted):
			cause = err
		default:
			return fmt.Errorf("following the store: %w", err)
		}
		after, err = e.reload(ctx, e.feed.revision(), cause)
		if asked != nil {
			asked <- err
		}
		select {
		case <-ctx.Done():
			return nil // stopping: a Load cut short is no failure
		default:
		}
		if err != nil {
			return fmt.Errorf("following the store: %w", err)
		}
	}
}

// followUntilReload runs the store's Follow from after until it ends, or
// until Reload asks for a reload (asked: where to answer it).
func (e *Engine) followUntilReload(ctx context.Context, after uint64) (asked chan error, err error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan chan error, 1)
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		select {
		case r := <-e.reloads:
			got <- r
			cancel()
		case <-fctx.Done():
		}
	}()
	err = e.opts.Store.Follow(fctx, after, func(pos uint64, changes []*Change) {
		if len(changes) > 0 {
			for _, c := range changes {
				if c.settled != nil { // this engine's, as it was given
					<-c.settled
				}
			}
			e.feed.publish(changes)
			e.applyFollowed(changes)
		}
		e.feed.reach(pos)
	})
	cancel()
	<-waiting
	select {
	case asked = <-got:
		return asked, nil
	default:
		return nil, err
	}
}

// applyFollowed keeps the registry in step with published changes: new
// targets are registered (and owned when Options.Owns says so), deleted
// ones forgotten (and disowned). Changes of targets this engine owns are
// its own (only the owner writes a target after its creation): its entry
// is ahead of them already. So are the changes a store with one writer
// delivers as they were made (their entry set): its registry is the
// engine's, not the store's.
func (e *Engine) applyFollowed(changes []*Change) {
	for _, c := range changes {
		if c.entry != nil {
			continue
		}
		e.mu.Lock()
		en := e.targets[c.Name]
		switch {
		case c.Delete:
			if en != nil {
				delete(e.targets, c.Name)
				e.countClientLocked(en.client, -1)
			}
			e.mu.Unlock()
			if en != nil {
				en.mu.Lock()
				e.disownLocked(en, nil)
				en.removed = true
				en.mu.Unlock()
			}
		case en == nil && c.Target != nil:
			en = &entry{name: c.Name, client: c.Target.Status.Client}
			en.share(c.record())
			e.targets[c.Name] = en
			e.countClientLocked(en.client, 1)
			e.mu.Unlock()
			if e.owns(c.Name) {
				// Just created: its probes start now, as Create's do.
				e.ownEntry(en, c.Event.Kind != KindCreated)
			}
		default:
			e.mu.Unlock()
			if en != nil && c.Target != nil {
				en.mu.Lock()
				if !en.owned {
					en.share(c.record())
				}
				en.mu.Unlock()
			}
		}
	}
}

// owns reports whether this engine is to probe the named target.
func (e *Engine) owns(name string) bool {
	return e.opts.Owns == nil || e.opts.Owns(name)
}

// Sync waits until the engine's view has caught up with revision rev of
// its store (every change up to rev — over a SharedStore by any replica —
// is published here), or ctx is done. A replica that gained shards at
// revision rev syncs before it takes their targets over, so that it starts
// from everything their previous owner wrote.
func (e *Engine) Sync(ctx context.Context, rev uint64) error {
	return e.feed.waitReached(ctx, rev)
}

// Heartbeat returns once a one-shot timer of the engine's timer wheel has
// fired: proof that the scheduler makes progress (cluster mode renews its
// lease only then, so a replica that is alive but stuck loses its shards).
// It returns ctx's error if the timer did not fire in time.
func (e *Engine) Heartbeat(ctx context.Context) error {
	if err := e.awaitRunning(ctx); err != nil {
		return err
	}
	fired := make(chan struct{})
	t := e.exec.wheel.After(0, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
