package engine

import (
	"testing"
	"time"

	"github.com/probed/probed/engine/probe"
)

// TestTimingSetShares: equal timings are one copy, different ones are
// not, and past maxTimings a timing is a copy of its own.
func TestTimingSetShares(t *testing.T) {
	t.Parallel()
	var s timingSet
	a := probe.Effective{Period: time.Second, Timeout: time.Second, SuccessThreshold: 1, FailureThreshold: 3}
	b := a
	b.Period = 2 * time.Second
	pa, pb := s.of(a), s.of(b)
	if s.of(a) != pa || pa == pb || *pa != a || *pb != b {
		t.Fatalf("of(a) twice: %p %p, of(b) %p: want a shared and b apart", pa, s.of(a), pb)
	}
	for i := range maxTimings {
		s.of(probe.Effective{Period: time.Duration(i + 10)})
	}
	over := probe.Effective{Period: time.Hour}
	if p := s.of(over); *p != over || s.of(over) == p || len(s.m) != maxTimings {
		t.Errorf("past the bound: %d timings held, the same copy returned twice %v; want %d and copies", len(s.m), s.of(over) == p, maxTimings)
	}
}
