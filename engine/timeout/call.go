package timeout

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// Call calls fn with a context from With(parent, clock, d) and returns
// what fn returns, except that when fn failed because d passed the error
// is ErrExpired (check with errors.Is(err, ErrExpired); a parent's own
// deadline or cancel is returned as it is). It is a bounded wait: e.g.
// the next batch of a watcher, or an idle notice when none came in d.
func Call[T any](parent context.Context, clock clockwork.Clock, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := With(parent, clock, d)
	defer cancel()
	v, err := fn(ctx)
	if err != nil && Expired(ctx) {
		return v, ErrExpired
	}
	return v, err
}
