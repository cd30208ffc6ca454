package wheel_test

import (
	"testing"
	"time"

	"github.com/probed/probed/engine/wheel"
)

func TestPhaseIsDeterministicAndInRange(t *testing.T) {
	tests := []struct {
		name   string
		period time.Duration
	}{
		{"one millisecond", time.Millisecond},
		{"odd period", 7*time.Millisecond + 3},
		{"ten seconds", 10 * time.Second},
		{"MaxPeriod", wheel.MaxPeriod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for id := range wheel.ID(1000) {
				p := wheel.Phase(id, tt.period)
				if p < 0 || p >= tt.period {
					t.Fatalf("Phase(%d, %v) = %v, want in [0, %v)", id, tt.period, p, tt.period)
				}
				if again := wheel.Phase(id, tt.period); again != p {
					t.Fatalf("Phase(%d, %v) = %v then %v, want equal", id, tt.period, p, again)
				}
			}
		})
	}
	if got := wheel.Phase(1, 0); got != 0 {
		t.Errorf("Phase(1, 0) = %v, want 0", got)
	}
	// Pinned values: the phase must not change between releases, or every
	// item would move after an upgrade.
	if got, want := wheel.Phase(0, time.Second), time.Duration(0xe220a8397b1dcdaf%uint64(time.Second)); got != want {
		t.Errorf("Phase(0, 1s) = %v, want %v", got, want)
	}
}

func TestPhaseSpreadsUniformly(t *testing.T) {
	const (
		n       = 10_000
		buckets = 10
		period  = 100 * time.Millisecond
	)
	var count [buckets]int
	for id := range wheel.ID(n) {
		count[wheel.Phase(id, period)*buckets/period]++
	}
	// Expected 1000 per bucket with a standard deviation of about 30.
	for b, c := range count {
		if c < 850 || c > 1150 {
			t.Errorf("bucket %d of %d holds %d phases, want about %d (all: %v)", b, buckets, c, n/buckets, count)
		}
	}
}

func TestSpreadFiresAtPhase(t *testing.T) {
	h := newHarness(t).start()
	const (
		n      = 10_000
		period = 100 * time.Millisecond
	)
	start := h.clock.Now()
	for id := range wheel.ID(n) {
		if err := h.w.Spread(id, 0, start, period); err != nil {
			t.Fatalf("Spread(%d) = %v", id, err)
		}
	}
	seen := make(map[wheel.ID]bool, n)
	perTick := make(map[time.Duration]int)
	for range period / time.Millisecond {
		h.advance(time.Millisecond)
		for _, f := range h.drain() {
			if want := start.Add(wheel.Phase(f.ID, period)); !f.Due.Equal(want) {
				t.Fatalf("id %d: Due = %v, want start + Phase = %v", f.ID, f.Due.Sub(start), want.Sub(start))
			}
			if seen[f.ID] {
				t.Fatalf("id %d fired twice in one period", f.ID)
			}
			seen[f.ID] = true
			perTick[h.clock.Since(start)]++
		}
	}
	if len(seen) != n {
		t.Errorf("%d ids fired in the first period, want %d", len(seen), n)
	}
	// 100 fires per tick on average; none should hold a crowd.
	for tick, c := range perTick {
		if c > 200 {
			t.Errorf("%d fires in the tick at %v, want about %d", c, tick, n/100)
		}
	}
}
