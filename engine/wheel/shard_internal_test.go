package wheel

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// manualClock is a clockwork.Clock whose time only moves by hand and whose
// timers never fire. Unlike clockwork's fake clock it does not allocate, so
// allocation counts see only the wheel.
type manualClock struct {
	clockwork.Clock // unused methods panic
	now             time.Time
}

func (c *manualClock) Now() time.Time                         { return c.now }
func (c *manualClock) Since(t time.Time) time.Duration        { return c.now.Sub(t) }
func (c *manualClock) NewTimer(time.Duration) clockwork.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) Chan() <-chan time.Time   { return nil }
func (stoppedTimer) Reset(time.Duration) bool { return false }
func (stoppedTimer) Stop() bool               { return false }

// stepper drives the only shard of a wheel by hand: advance the clock one
// tick, then run one pass on the test goroutine, as the driver would.
type stepper struct {
	clock *manualClock
	w     *Wheel
	fires int
}

func newStepper(tb testing.TB, n int) *stepper {
	tb.Helper()
	st := &stepper{clock: &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	st.w = New(st.clock, func(fs []Fire) {
		st.fires += len(fs)
	}, WithShards(1))
	for id := range ID(n) {
		if err := st.w.Spread(id, 0, st.clock.Now(), 100*time.Millisecond); err != nil {
			tb.Fatal(err)
		}
	}
	st.w.pass(false)
	return st
}

func (st *stepper) step() {
	st.clock.now = st.clock.now.Add(time.Millisecond)
	st.w.pass(true)
}

func TestFirePathDoesNotAllocate(t *testing.T) {
	st := newStepper(t, 10_000)
	for range 200 { // grow the batches to their steady size
		st.step()
	}
	st.fires = 0
	if allocs := testing.AllocsPerRun(100, st.step); allocs != 0 {
		t.Errorf("allocations per tick = %v, want 0", allocs)
	}
	if st.fires < 101*90 {
		t.Errorf("%d fires in 101 ticks, want about %d", st.fires, 101*100)
	}
}

func TestTimerPathDoesNotAllocate(t *testing.T) {
	st := newStepper(t, 0)
	var runs int
	f := func() { runs++ }
	step := func() {
		st.w.After(0, f).Stop()
		st.w.After(0, f)
		st.step()
	}
	for range 10 {
		step()
	}
	// After allocates the *Timer it returns, and nothing else.
	if allocs := testing.AllocsPerRun(100, step); allocs != 2 {
		t.Errorf("allocations per After+Stop+After+tick = %v, want 2 (the Timers)", allocs)
	}
	if runs != 111 {
		t.Errorf("timer ran %d times, want 111", runs)
	}
}

// BenchmarkPass measures one driver pass over 100,000 items with a 100ms
// period (about 1,000 fires per tick), Done included, without goroutine
// hand-offs or clock costs.
func BenchmarkPass(b *testing.B) {
	st := newStepper(b, 100_000)
	for range 200 {
		st.step()
	}
	st.fires = 0
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		st.step()
	}
	if st.fires > 0 {
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(st.fires), "ns/fire")
	}
}
