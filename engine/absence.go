package engine

import (
	"context"
	"fmt"
	"time"
)

// A PresenceReader is a SharedStore that can say whether a target exists
// from a read no other replica's acknowledged write precedes unseen (a
// linearizable read: etcd's quorum read). A replica answers NotFound only
// after asking it, so a target another replica created is never denied by
// a replica whose view lags behind the store.
type PresenceReader interface {
	// Present reports whether the named target exists in the store now
	// and, if it does, the position a follower must have reached
	// (Engine.Sync) to have seen its last spec write.
	Present(ctx context.Context, name string) (pos uint64, ok bool, err error)
}

// presenceSync bounds how long a NotFound waits for the view to catch up
// with a target the store has (vouchAbsence), on the engine's clock. A
// view that does not catch up that fast is stalled: the call fails with
// ErrSuspended and another replica can answer.
const presenceSync = 2 * time.Second

// vouchAbsence decides a NotFound err of the named target: it returns err
// when the target is absent, an error wrapping ErrSuspended when this
// replica cannot vouch for its view — suspended (Suspend), its lease past
// its local deadline (Options.MayProbe false), its view behind a target
// the store has, or the store unreadable — and again true, with no error,
// when the view has just caught up with the store's copy of the target:
// the caller looks it up once more.
//
// A replica woken from a pause (SIGSTOP, a long GC) answers before its
// lease watchdog has suspended it, and a replica whose lease is valid may
// follow a stalled watch: both have a view that misses what the others
// wrote meanwhile. A NotFound then tells the client that a target another
// replica created is gone, and a Delete so answered leaves it in place
// (issue 22, found by the chaos soak). Over a PresenceReader every
// NotFound therefore costs one linearizable read of the store.
func (e *Engine) vouchAbsence(ctx context.Context, name string, err error) (again bool, _ error) {
	if verr := e.vouchView(); verr != nil {
		// Not err itself: the absence it could not vouch for is no
		// answer (a NotFound here made a Delete of an existing target
		// "succeed").
		return false, verr
	}
	if e.presence == nil {
		return false, err
	}
	pos, ok, rerr := e.presence.Present(ctx, name)
	switch {
	case rerr != nil && ctx.Err() != nil:
		return false, ctx.Err()
	case rerr != nil:
		return false, fmt.Errorf("%w: cannot confirm that target %q does not exist: %w", ErrSuspended, name, rerr)
	case !ok:
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := e.clock.AfterFunc(presenceSync, cancel)
	defer t.Stop()
	if serr := e.feed.waitReached(sctx, pos); serr != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("%w: target %q exists in the store (at %d) but this replica's view is at %d after %v; another replica can answer", ErrSuspended, name, pos, e.feed.revision(), presenceSync)
	}
	return true, nil
}

// vouchView returns an error wrapping ErrSuspended when this replica
// cannot vouch for its view as a whole: suspended (Suspend), or its lease
// past its local deadline (Options.MayProbe false), before its watchdog
// suspends it. Get, List and a new Watch answer only from a view it can
// vouch for: a page (or a snapshot) that misses what other replicas
// created meanwhile tells a client those targets do not exist, and a
// target another replica deleted meanwhile would be shown as existing.
func (e *Engine) vouchView() error {
	if err := e.feed.vouched(); err != nil {
		return err
	}
	if may := e.opts.MayProbe; may != nil && !may() {
		return fmt.Errorf("%w: this replica's lease is over, its view may miss what other replicas wrote; another replica can answer", ErrSuspended)
	}
	return nil
}
