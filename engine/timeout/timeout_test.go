package timeout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/timeout"
)

func TestWithFakeClock(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	ctx, cancel := timeout.With(context.Background(), clock, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("context reports a deadline; real I/O would read the fake calendar")
	}
	if ctx.Err() != nil {
		t.Fatalf("Err() = %v before the timeout, want nil (and no blocking)", ctx.Err())
	}
	clock.Advance(999 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Fatal("done before the timeout")
	default:
	}
	clock.Advance(time.Millisecond)
	<-ctx.Done()
	if !timeout.Expired(ctx) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("cause = %v, want the timeout (matching context.DeadlineExceeded)", context.Cause(ctx))
	}
}

func TestCancelIsNotExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cancel func(parentCancel, cancel context.CancelFunc)
	}{
		{"own cancel", func(_, cancel context.CancelFunc) { cancel() }},
		{"parent cancel", func(parentCancel, _ context.CancelFunc) { parentCancel() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			parent, parentCancel := context.WithCancel(context.Background())
			defer parentCancel()
			ctx, cancel := timeout.With(parent, clock, time.Second)
			defer cancel()
			tt.cancel(parentCancel, cancel)
			<-ctx.Done()
			if timeout.Expired(ctx) {
				t.Error("Expired() = true after a cancel")
			}
		})
	}
}

func TestWithRealClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := timeout.With(context.Background(), clockwork.NewRealClock(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if !timeout.Expired(ctx) {
		t.Errorf("cause = %v, want expiry", context.Cause(ctx))
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	// wait returns "done" when release is closed, else its context's error.
	wait := func(release <-chan struct{}) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			select {
			case <-release:
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	t.Run("returns in time", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		close(release)
		got, err := timeout.Call(context.Background(), clockwork.NewFakeClock(), time.Second, wait(release))
		if got != "done" || err != nil {
			t.Errorf("got %q, %v; want done, nil", got, err)
		}
	})
	t.Run("expires", func(t *testing.T) {
		t.Parallel()
		clock := clockwork.NewFakeClock()
		go func() {
			_ = clock.BlockUntilContext(t.Context(), 1)
			clock.Advance(time.Second)
		}()
		_, err := timeout.Call(context.Background(), clock, time.Second, wait(nil))
		if !errors.Is(err, timeout.ErrExpired) {
			t.Errorf("err = %v, want ErrExpired", err)
		}
	})
	t.Run("parent cancelled", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := timeout.Call(parent, clockwork.NewFakeClock(), time.Second, wait(nil))
		if !errors.Is(err, context.Canceled) || errors.Is(err, timeout.ErrExpired) {
			t.Errorf("err = %v, want context.Canceled, not ErrExpired", err)
		}
	})
	t.Run("parent deadline", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := timeout.Call(parent, clockwork.NewFakeClock(), time.Hour, wait(nil))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, timeout.ErrExpired) {
			t.Errorf("err = %v, want the parent's DeadlineExceeded, not ErrExpired", err)
		}
	})
}
