package wheel_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/engine/wheel"
)

func TestStatsLatenessHistogram(t *testing.T) {
	us := time.Microsecond
	// With a 20ms tick, an item due at 20ms-x fires x late at 20ms.
	h := newHarness(t, wheel.WithTick(20*time.Millisecond), wheel.WithShards(1)).start()
	lateness := []time.Duration{100 * us, 800 * us, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 19 * time.Millisecond}
	for i, late := range lateness {
		if err := h.w.Schedule(wheel.ID(i), 0, at(20*time.Millisecond-late), time.Hour); err != nil {
			t.Fatalf("Schedule() = %v", err)
		}
	}
	h.advance(20 * time.Millisecond)
	if got := len(h.drain()); got != len(lateness) {
		t.Fatalf("%d fires, want %d", got, len(lateness))
	}
	// One more fire, 200ms late, from a driver that fell behind.
	if err := h.w.Schedule(99, 0, at(40*time.Millisecond), time.Hour); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	h.advance(220 * time.Millisecond)

	st := h.w.Stats()
	want := wheel.Histogram{
		Bounds: [wheel.NumLatenessBuckets]time.Duration{
			500 * us, time.Millisecond, 2500 * us, 5 * time.Millisecond, 10 * time.Millisecond,
			25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, math.MaxInt64,
		},
		Counts: [wheel.NumLatenessBuckets]uint64{1, 2, 3, 4, 5, 6, 6, 6, 7},
		Sum:    100*us + 800*us + (2+4+8+19+200)*time.Millisecond,
	}
	if diff := cmp.Diff(want, st.Lateness); diff != "" {
		t.Errorf("Stats().Lateness (-want +got):\n%s", diff)
	}
	if got := st.Lateness.Count(); got != 7 {
		t.Errorf("Lateness.Count() = %d, want 7", got)
	}
	if st.Fires != 7 || st.Scheduled != 7 || st.Missed != 0 {
		t.Errorf("Stats() = %+v, want 7 fires, 7 scheduled, no skip or miss", st)
	}
}

func TestStatsCountsAllShards(t *testing.T) {
	h := newHarness(t).start()
	const n = 64
	for id := range wheel.ID(n) {
		if err := h.w.Schedule(id, 0, at(time.Millisecond), 10*time.Millisecond); err != nil {
			t.Fatalf("Schedule() = %v", err)
		}
	}
	h.w.After(time.Hour, func() {})
	for range 3 {
		h.advance(10 * time.Millisecond)
	}
	st := h.w.Stats()
	if st.Fires != 3*n || st.Scheduled != n || st.Timers != 1 || st.Missed != 0 {
		t.Errorf("Stats() = fires %d scheduled %d timers %d missed %d, want %d %d 1 0",
			st.Fires, st.Scheduled, st.Timers, st.Missed, 3*n, n)
	}
}
