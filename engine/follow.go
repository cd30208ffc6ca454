package engine

import (
	"context"
	"errors"
	"fmt"
)

// The engine follows the store's ordered log: every commit, its own
// included, becomes known as the store's Follow delivers it — the one
// path by which changes become visible — and so do the changes of which
// targets the engine probes (Delivery.Owned). The follow loop applies
// each delivery to the registry and the probing (own.go: a target created
// anywhere is registered, and probed when this engine owns it; one
// deleted anywhere is forgotten), then publishes it.

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
	err = e.opts.Store.Follow(fctx, after, e.apply)
	cancel()
	<-waiting
	select {
	case asked = <-got:
		return asked, nil
	default:
		return nil, err
	}
}

// Sync waits until the engine's view has caught up with revision rev of
// its store (every change up to rev — over a SharedStore by any replica —
// is published here), or ctx is done: a replica that rejoined waits for
// its view to reach the join's revision before it serves again.
func (e *Engine) Sync(ctx context.Context, rev uint64) error {
	return e.feed.waitReached(ctx, rev)
}

// SyncOwned is Sync, and then waits for the rest of the delivery that
// reached rev to be applied, its ownership included: once it returns, a
// target of a shard this engine gained at or before rev is owned here.
// (A delivery marks its position reached before it takes the targets of
// the shards it gains, all under one lock, which SyncOwned takes once.)
func (e *Engine) SyncOwned(ctx context.Context, rev uint64) error {
	if err := e.Sync(ctx, rev); err != nil {
		return err
	}
	e.own.Lock()
	//nolint:staticcheck // SA2001: the lock is the barrier: the delivery holding it has been applied.
	e.own.Unlock()
	return nil
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
