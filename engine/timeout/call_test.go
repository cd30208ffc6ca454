package timeout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/timeout"
)

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
