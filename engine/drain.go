package engine

import (
	"context"
	"sync"
	"time"
)

// Deletion is graceful: Delete makes a target TERMINATING, its owner runs
// the preStop sleep on the timer wheel (bounded by the grace period), and
// then the drain goroutine removes it.

// drainQueue hands targets whose preStop sleep ended from the timer wheel
// (which must not block) to the drain goroutine.
type drainQueue struct {
	mu      sync.Mutex
	pending []*entry // guarded by mu
	wake    chan struct{}
}

func (q *drainQueue) init() { q.wake = make(chan struct{}, 1) }

func (q *drainQueue) push(en *entry) {
	q.mu.Lock()
	q.pending = append(q.pending, en)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *drainQueue) take() []*entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending
	q.pending = nil
	return p
}

// drainLoop removes targets whose drain ended, until ctx is done.
func (e *Engine) drainLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.drains.wake:
		}
		for _, en := range e.drains.take() {
			if err := e.remove(ctx, en); err != nil && ctx.Err() == nil {
				e.log.Error("removing drained target", "target", en.name, "err", err)
			}
		}
	}
}

// scheduleDrainLocked arms the preStop sleep of a terminating target,
// counted from its deletion; en.mu held.
func (e *Engine) scheduleDrainLocked(en *entry, now time.Time) {
	sleep, _ := en.spec.PreStopSleep()
	sleep = min(sleep, en.gracePeriodLocked())
	remaining := en.deleteTime().Add(sleep).Sub(now)
	if remaining <= 0 {
		e.drains.push(en) // no sleep (or it is over): remove at once
		return
	}
	en.drain = e.exec.wheel.After(remaining, func() { e.drains.push(en) })
}

// remove ends a drained target: DELETED is published, then the target and
// its probes are gone. A target whose drain this engine no longer drives
// (disowned meanwhile) is left to its owner.
func (e *Engine) remove(ctx context.Context, en *entry) error {
	en.mu.Lock()
	if en.removed || !en.owned {
		en.mu.Unlock()
		return nil
	}
	// The target leaves the registry when the store's log delivers
	// DELETED, before it is published (follow.go): a client that sees it
	// may create the target again at once. Nothing else can be queued
	// about en meanwhile: removed refuses every operation, and probes of a
	// terminating target publish nothing.
	en.drain = nil
	now := e.clock.Now()
	ch := e.changeLocked(en, Event{Kind: KindDeleted, Reason: ReasonTerminating}, false, now)
	ch.Delete = true
	done, err := e.commits.submit([]*Change{ch}, true)
	e.disownLocked(en, nil)
	en.removed = true
	en.mu.Unlock()
	if err == nil {
		err = wait(ctx, done)
	}
	return err
}
