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
	// The same path as on a fake clock: no Deadline, cancelled by the
	// clock's timer.
	if _, ok := ctx.Deadline(); ok {
		t.Error("context reports a deadline on the real clock; every clock must take the same path")
	}
	<-ctx.Done()
	if !timeout.Expired(ctx) {
		t.Errorf("cause = %v, want expiry", context.Cause(ctx))
	}
}

// BenchmarkWith compares the cost of a probe's timeout context with the
// runtime's own deadline context, on the real clock (a probe run creates
// and cancels one).
func BenchmarkWith(b *testing.B) {
	clock := clockwork.NewRealClock()
	b.Run("timeout.With", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := timeout.With(context.Background(), clock, time.Second)
			cancel()
		}
	})
	b.Run("context.WithTimeoutCause", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithTimeoutCause(context.Background(), time.Second, timeout.ErrExpired)
			cancel()
		}
	})
}
