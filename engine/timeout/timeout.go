// Package timeout gives a context a timeout measured on an injected clock.
//
// A context from With is cancelled when the clock reaches the timeout. It
// has no Deadline, on every clock: a deadline on a fake clock's calendar
// would make real network I/O (which reads deadlines) time out at once or
// never, and one code path for every clock means the tests, which run on
// a fake clock, run exactly what production runs. I/O under such a
// context stops when the context is done, as Go's net package and every
// client built on it (net/http, grpc) do for any cancellable context.
// (clockwork.WithTimeout reports a fake-calendar Deadline and its Err
// blocks until the context is done; that is why this package exists.)
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

// With returns a context cancelled with cause ErrExpired when d has passed
// on clock, or cancelled when cancel is called or parent is done. Call
// cancel as soon as the work is done to release the clock's timer.
func With(parent context.Context, clock clockwork.Clock, d time.Duration) (context.Context, context.CancelFunc) {
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
