package wheel_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

func TestShardsFireTheirOwnIDs(t *testing.T) {
	h := newHarness(t).start()
	ids := []wheel.ID{0, 1, 2, 3, 4, 5, 1000, 1001, 65_535, 300_001}
	for _, id := range ids {
		if err := h.w.Schedule(id, 0, at(time.Millisecond), time.Second); err != nil {
			t.Fatalf("Schedule(%d) = %v", id, err)
		}
	}
	h.advance(time.Millisecond)
	got := map[wheel.ID]int{}
	for _, f := range h.drain() {
		got[f.ID]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("id %d fired %d times, want 1 (all: %v)", id, got[id], got)
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d ids fired, want %d", len(got), len(ids))
	}
}

func TestEarlierItemWakesSleepingDriver(t *testing.T) {
	h := newHarness(t, wheel.WithShards(1)).start()
	// The idle driver sleeps for an hour; a new item due in 3ms must wake it.
	if err := h.w.Schedule(1, 0, at(3*time.Millisecond), time.Hour); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	expectFires(t, h, 1, time.Millisecond, 3*time.Millisecond)
	// Same from inside Dispatch: a fire of 1 schedules 2 for 1ms later.
	h2 := newHarness(t, wheel.WithShards(1))
	h2.onFire = func(f wheel.Fire) {
		if f.ID == 1 {
			_ = h2.w.Schedule(2, 0, f.Due.Add(time.Millisecond), time.Hour)
		}
	}
	h2.start()
	if err := h2.w.Schedule(1, 0, at(5*time.Millisecond), time.Hour); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	h2.advanceTo(at(5 * time.Millisecond))
	h2.advanceTo(at(6 * time.Millisecond))
	if got := ids(h2.drain()); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("fires = %v, want [1 2]", got)
	}
}

// BenchmarkFire measures the fire path: 100,000 items with a 100ms period
// spread over a 1ms-tick wheel on a fake clock, so each op (one tick)
// fires about 1,000 items; Dispatch calls Done for each. ns/fire includes
// the fake clock's own cost per tick.
func BenchmarkFire(b *testing.B) {
	const (
		n      = 100_000
		period = 100 * time.Millisecond
	)
	clock := clockwork.NewFakeClockAt(epoch)
	var fires atomic.Int64
	w := wheel.New(clock, func(fs []wheel.Fire) {
		fires.Add(int64(len(fs)))
	})
	for id := range wheel.ID(n) {
		if err := w.Spread(id, 0, epoch, period); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	park := func() {
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	for range period / time.Millisecond { // one warm-up period
		park()
		clock.Advance(time.Millisecond)
	}
	park()
	fires.Store(0)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		clock.Advance(time.Millisecond)
		park()
	}
	elapsed := time.Since(start)
	if f := fires.Load(); f > 0 {
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(f), "ns/fire")
		b.ReportMetric(float64(f)/float64(b.N), "fires/op")
	}
}

// TestOneDriverServesEveryShard checks that the one driver sleeps until the
// earliest work of any shard: an earlier item in any shard wakes it, and an
// item scheduled from Dispatch into a shard the current pass has already
// visited (or not yet) fires on its own tick.
func TestOneDriverServesEveryShard(t *testing.T) {
	const shards = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(shards)) // WithShards is capped at GOMAXPROCS
	ms := time.Millisecond
	t.Run("an earlier item in any shard wakes the driver", func(t *testing.T) {
		h := newHarness(t, wheel.WithShards(shards)).start()
		if h.w.Shards() != shards {
			t.Fatalf("Shards() = %d, want %d", h.w.Shards(), shards)
		}
		if err := h.w.Schedule(0, 0, at(time.Hour), time.Hour); err != nil {
			t.Fatalf("Schedule() = %v", err)
		}
		for id := wheel.ID(1); id < shards; id++ {
			due := h.clock.Since(epoch) + 3*ms
			if err := h.w.Schedule(id, 0, at(due), time.Hour); err != nil {
				t.Fatalf("Schedule(%d) = %v", id, err)
			}
			expectFires(t, h, id, ms, due)
		}
	})
	tests := []struct {
		name     string
		src, dst wheel.ID // shard = id % shards; the driver visits shards in order
	}{
		{name: "into a shard visited earlier in the pass", src: shards - 1, dst: 0},
		{name: "into a shard visited later in the pass", src: 0, dst: shards - 1},
		{name: "into the same shard", src: 1, dst: 1 + shards},
	}
	for _, tt := range tests {
		t.Run("scheduled from Dispatch "+tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithShards(shards))
			h.onFire = func(f wheel.Fire) {
				if f.ID == tt.src {
					if err := h.w.Schedule(tt.dst, 0, f.Due.Add(ms), time.Hour); err != nil {
						t.Errorf("Schedule() from Dispatch = %v", err)
					}
				}
			}
			h.start()
			if err := h.w.Schedule(tt.src, 0, at(5*ms), time.Hour); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			expectFires(t, h, tt.src, ms, 5*ms)
			expectFires(t, h, tt.dst, ms, 6*ms)
		})
	}
}
