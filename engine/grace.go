package engine

import (
	"context"
	"fmt"
	"time"
)

// DeleteOption changes one deletion (Delete).
type DeleteOption func(*deleteOptions)

type deleteOptions struct {
	grace *time.Duration
}

// WithGracePeriod overrides the target's termination grace period for
// this deletion, as Kubernetes' DeleteOptions.gracePeriodSeconds does: the
// preStop sleep is cut to d, and 0 removes the target at once — the
// escape hatch from a sleep or grace period too long to wait for. On a
// target already terminating, it can only shorten the time left. d must
// not be negative (it counts as 0).
func WithGracePeriod(d time.Duration) DeleteOption {
	d = max(d, 0)
	return func(o *deleteOptions) { o.grace = &d }
}

func deleteOptionsOf(opts []DeleteOption) deleteOptions {
	var o deleteOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// gracePeriodLocked is the grace period of en's deletion, counted from its
// DeleteTime: the one the deletion was given, else the spec's; en.mu held.
func (en *entry) gracePeriodLocked() time.Duration {
	if g := en.grace(); g != nil {
		return *g
	}
	return en.spec.GracePeriod()
}

// shortenGraceLocked gives a terminating target a grace period of d from now,
// when that ends its drain sooner: the change is published (a TERMINATING
// event saying so, durable like every other) and the drain rescheduled.
// It is called with en.mu held and unlocks it.
func (e *Engine) shortenGraceLocked(ctx context.Context, en *entry, d time.Duration) (*Target, error) {
	now := e.clock.Now()
	sleep, _ := en.spec.PreStopSleep()
	elapsed := max(now.Sub(en.deleteTime()), 0)
	if remaining := min(sleep, en.gracePeriodLocked()) - elapsed; d >= remaining {
		en.mu.Unlock()
		return e.getOwned(ctx, en.name) // no sooner: nothing changes
	}
	g := elapsed + d // less than the current grace period: no overflow
	en.editLocked().DeletionGracePeriod = &g
	if en.drain != nil {
		en.drain.Stop()
		en.drain = nil
	}
	ch := e.changeLocked(en, Event{Kind: KindTerminating, Reason: ReasonTerminating,
		Message: fmt.Sprintf("grace period shortened: removal in %v", d)}, false, now)
	done, err := e.commits.submit([]*Change{ch}, true)
	if err == nil {
		e.scheduleDrainLocked(en, now)
	}
	en.mu.Unlock()
	return e.settle(ctx, done, err, ch)
}
