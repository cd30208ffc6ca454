package main

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/probed/probed/client"
)

// maxRateLimitWait bounds one wait for the server's rate limit: a delay
// beyond it is not waited for (the error is reported).
const maxRateLimitWait = 10 * time.Second

// waitingOutRateLimit calls fn until it does not fail with the server's
// rate limit (--registrations-per-second): a ResourceExhausted error with
// a google.rpc.RetryInfo is retried after the delay it names, while ctx
// lasts. Any other error, and a delay over maxRateLimitWait, is returned.
func waitingOutRateLimit(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		d, ok := retryDelay(err)
		if !ok || d > maxRateLimitWait {
			return err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// retryDelay returns the RetryInfo delay of a ResourceExhausted error.
func retryDelay(err error) (time.Duration, bool) {
	if !errors.Is(err, client.ErrResourceExhausted) {
		return 0, false
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return max(ri.GetRetryDelay().AsDuration(), time.Millisecond), true
		}
	}
	return 0, false
}
