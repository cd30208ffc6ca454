// Package timeout gives a context a timeout measured on an injected clock.
//
// clockwork.WithTimeout does the same for a fake clock, but its context
// reports a Deadline on the fake clock's calendar (which makes real network
// I/O, which reads the deadline, time out at once) and its Err blocks until
// the context is done. A context from With has no Deadline: it is
// cancelled when the clock reaches the timeout, so code doing real I/O
// under a fake clock stops exactly when the test advances the clock past
// the timeout.
package timeout

import (
	"context"
	"errors"
	"time"

	"github.com/jonboulle/clockwork"
)

// ErrExpired is the cause (context.Cause) of a context whose timeout
// passed. It matches context.DeadlineExceeded.
var ErrExpired = expired{}

type expired struct{}

func (expired) Error() string   { return "timeout expired" }
func (expired) Is(e error) bool { return e == context.DeadlineExceeded }

// With returns a context cancelled when d has passed on clock, when cancel
// is called, or when parent is done. Call cancel as soon as the work is
// done to release the clock's timer. On a fake clock the context has no
// Deadline; on any other clock it is context.WithTimeoutCause.
func With(parent context.Context, clock clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, fake := clock.(*clockwork.FakeClock); !fake {
		// The real clock: the runtime's own deadline is cheaper (no extra
		// timer goroutine hand-off) and lets I/O see it.
		return context.WithTimeoutCause(parent, d, ErrExpired)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := clock.AfterFunc(d, func() { cancel(ErrExpired) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// Expired reports whether ctx (from With) ended because its timeout
// passed, rather than being cancelled.
func Expired(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrExpired)
}
