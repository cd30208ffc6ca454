package server

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/server/auth"
)

// TestChargeWaits: a token that comes before the call's overall bound is
// waited for, on the server's clock.
func TestChargeWaits(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	limiter := auth.NewLimiter(1, 1, clock.Now) // one token a second
	s := New(nil, Options{Clock: clock, Limiter: limiter})
	r := &setReader{s: s, ctx: t.Context(), id: "alice", start: clock.Now()}
	overall := clock.NewTimer(s.opts.ApplyTimeout)
	defer overall.Stop()
	if err := r.charge(overall); err != nil {
		t.Fatalf("charge with a token in the bucket = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.charge(overall) }()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 2); err != nil { // overall, and the wait for the token
		t.Fatalf("charge with an empty bucket does not wait on the clock: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("charge with an empty bucket returned %v before the token came", err)
	default:
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("charge once the token came = %v", err)
	}
}
