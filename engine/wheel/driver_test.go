package wheel_test

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

// TestDriverWakesOnlyForWork: the driver wakes up only at ticks with work,
// and once to re-arm for an insert before the tick it sleeps until. A
// removal of the work it sleeps until (a timer stopped, an item cancelled
// or moved) re-arms it for the next work left, in any shard, so that it
// does not wake up for nothing. Timing on the fake clock; Stats.Wakes
// counts the wake-ups.
func TestDriverWakesOnlyForWork(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		// act runs with the driver asleep until 100ms (item 1, in shard 1
		// of 2); it returns the time of the next work it leaves and
		// whether that work is item 1 at 100ms.
		act func(t *testing.T, h *harness) (next time.Duration, item bool)
		// toArm is the number of wake-ups act causes at once: one per
		// insert before the tick the driver sleeps until.
		toArm uint64
	}{
		{"timer after the next fire", func(t *testing.T, h *harness) (time.Duration, bool) {
			h.w.After(200*ms, func() {})
			return 100 * ms, true
		}, 0},
		{"timer before the next fire", func(t *testing.T, h *harness) (time.Duration, bool) {
			h.w.After(10*ms, func() {})
			return 10 * ms, false
		}, 1},
		{"timer before the next fire, stopped", func(t *testing.T, h *harness) (time.Duration, bool) {
			tm := h.w.After(10*ms, func() {})
			h.park()
			if !tm.Stop() {
				t.Fatal("Stop() = false, want true")
			}
			return 100 * ms, true
		}, 1},
		{"item in the other shard before the next fire, cancelled", func(t *testing.T, h *harness) (time.Duration, bool) {
			if err := h.w.Schedule(2, 0, at(10*ms), time.Hour); err != nil {
				t.Fatal(err)
			}
			h.park()
			if !h.w.Cancel(2) {
				t.Fatal("Cancel(2) = false, want true")
			}
			return 100 * ms, true
		}, 1},
		{"next fire moved later", func(t *testing.T, h *harness) (time.Duration, bool) {
			if err := h.w.Reschedule(1, at(300*ms), time.Hour); err != nil {
				t.Fatal(err)
			}
			return 300 * ms, true
		}, 0},
		{"next fire moved later, a timer before it", func(t *testing.T, h *harness) (time.Duration, bool) {
			h.w.After(150*ms, func() {})
			h.park()
			if err := h.w.Reschedule(1, at(300*ms), time.Hour); err != nil {
				t.Fatal(err)
			}
			return 150 * ms, false
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithShards(2)).start()
			if err := h.w.Schedule(1, 0, at(100*ms), time.Hour); err != nil {
				t.Fatal(err)
			}
			h.park()
			before := h.w.Stats().Wakes
			next, item := tt.act(t, h)
			h.park()
			if got := h.w.Stats().Wakes - before; got != tt.toArm {
				t.Errorf("the driver woke up %d times at once; want %d", got, tt.toArm)
			}
			before += tt.toArm
			h.advanceTo(at(next - ms))
			if got := h.w.Stats().Wakes; got != before {
				t.Errorf("the driver woke up %d times before the next work (at %v); want 0", got-before, next)
			}
			h.advanceTo(at(next))
			if got := h.w.Stats().Wakes; got != before+1 {
				t.Errorf("the driver woke up %d times for the work at %v; want 1", got-before, next)
			}
			fires := h.drain()
			if item && (len(fires) != 1 || fires[0].ID != 1 || fires[0].Due != at(next)) {
				t.Errorf("fires at %v: %+v; want item 1's", next, fires)
			}
			if !item && len(fires) != 0 {
				t.Errorf("fires at %v: %+v; want none", next, fires)
			}
		})
	}
}

// TestRemovalRacingAnInsertMissesNoWakeUp: while the work the driver sleeps
// until is removed in one shard, an item inserted in another shard between
// that tick and the next work left still fires on time: the removal, which
// re-arms the driver for later, sees the insert, or the insert sees the
// driver being re-armed.
func TestRemovalRacingAnInsertMissesNoWakeUp(t *testing.T) {
	ms := time.Millisecond
	for round := range 200 {
		h := newHarness(t, wheel.WithShards(2)).start()
		// Items 0 and 2 are in shard 0, item 1 in shard 1.
		if err := h.w.Schedule(0, 0, at(50*ms), time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := h.w.Schedule(2, 0, at(100*ms), time.Hour); err != nil {
			t.Fatal(err)
		}
		h.park()
		var wg sync.WaitGroup
		wg.Go(func() { h.w.Cancel(0) })
		wg.Go(func() {
			if err := h.w.Schedule(1, 0, at(70*ms), time.Hour); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		h.advanceTo(at(70 * ms))
		if fires := h.drain(); len(fires) != 1 || fires[0].ID != 1 {
			t.Fatalf("round %d: fires at 70ms %+v, want item 1's", round, fires)
		}
		h.stop()
	}
}

// TestTimerStoppedDuringAPassWakesNothing: a probe's timeout armed and
// stopped while the driver hands out fires (a probe that returns at once)
// does not make the driver wake up at the timeout's tick.
func TestTimerStoppedDuringAPassWakesNothing(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t, wheel.WithShards(2))
	h.onFire = func(wheel.Fire) {
		if !h.w.After(5*ms, func() {}).Stop() {
			t.Error("Stop() = false, want true")
		}
	}
	h.start()
	if err := h.w.Schedule(1, 0, at(10*ms), 100*ms); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(at(10 * ms))
	if n := len(h.drain()); n != 1 {
		t.Fatalf("%d fires at 10ms, want 1", n)
	}
	before := h.w.Stats().Wakes
	h.advanceTo(at(109 * ms))
	if got := h.w.Stats().Wakes - before; got != 0 {
		t.Errorf("the driver woke up %d times before the next fire; want 0", got)
	}
	h.advanceTo(at(110 * ms))
	if n := len(h.drain()); n != 1 {
		t.Errorf("%d fires at 110ms, want 1", n)
	}
}

// movingWhileArming is a fake clock that moves by step, once, right after
// the wheel's driver read it to arm its timer and before it set the timer:
// as a test's Advance can land there on a loaded machine, or as the
// scheduler can stall the driver there on a real clock.
type movingWhileArming struct {
	*clockwork.FakeClock
	step  time.Duration
	armed atomic.Bool // the next read by armLocked moves the clock
}

func (c *movingWhileArming) Since(t time.Time) time.Duration {
	d := c.FakeClock.Since(t)
	if pc, _, _, ok := runtime.Caller(1); ok && strings.HasSuffix(runtime.FuncForPC(pc).Name(), ".armLocked") && c.armed.CompareAndSwap(true, false) {
		c.Advance(c.step)
	}
	return d
}

// TestClockMovingWhileArmingDelaysNothing: when the clock moves between
// the driver's reading of it and the setting of its timer (relative to the
// clock's time when set), the work it armed for still fires at its tick
// (at once, if the clock passed it), not that much later. Before, an item
// due at 100 ms, with the clock moved by 80 ms at the wrong moment, was
// armed for 180 ms: with a fake clock that then stood still at 100 ms (as
// the engine's scale test advanced it) it never fired.
func TestClockMovingWhileArmingDelaysNothing(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		step time.Duration // how far the clock moves while the driver arms
	}{
		{name: "less than the wait", step: 80 * ms},
		{name: "past the due tick", step: 150 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clockwork.NewFakeClockAt(epoch)
			clock := &movingWhileArming{FakeClock: fake, step: tt.step}
			h := newHarnessOn(t, fake, clock).start()
			clock.armed.Store(true)
			if err := h.w.Schedule(0, 0, at(100*ms), time.Hour); err != nil {
				t.Fatal(err)
			}
			h.park()
			if clock.armed.Load() {
				t.Fatal("the driver did not arm for the item")
			}
			// The fire is waited for, not the driver's park: the timer the
			// driver set from its stale reading counts as parked on the
			// fake clock until the driver reads the clock again, finds it
			// moved and re-arms (or passes at once), so a park can return
			// before the item fired. The clock stands still at 100 ms (or
			// at 150 ms, past it) from here: a fire at all is a fire in
			// time; a timer armed for 180 ms (or 250 ms) never fires.
			h.advanceTo(at(100 * ms))
			if f := h.next(); f.ID != 0 || !f.Due.Equal(at(100*ms)) {
				t.Fatalf("fire with the clock at %v: %+v, want item 0's due at 100ms", fake.Since(epoch), f)
			}
			h.park()
			if fires := h.drain(); len(fires) != 0 {
				t.Fatalf("more fires: %+v, want none", fires)
			}
		})
	}
}
