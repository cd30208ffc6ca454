package wheel_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/probed/probed/engine/wheel"
)

// expectFires steps the clock to each want due time (offsets from epoch)
// and checks that exactly one fire of id comes at the first tick boundary at
// or after it, not before; a due time in the past must fire at the next
// tick.
func expectFires(t *testing.T, h *harness, id wheel.ID, tick time.Duration, want ...time.Duration) {
	t.Helper()
	for _, due := range want {
		boundary := ceilTick(at(due), tick)
		maxLate := tick
		if !boundary.After(h.clock.Now()) {
			boundary = ceilTick(h.clock.Now().Add(time.Nanosecond), tick)
			maxLate = boundary.Sub(at(due)) + 1
		}
		if before := boundary.Add(-time.Nanosecond); before.After(h.clock.Now()) {
			h.advanceTo(before)
			if got := h.drain(); len(got) != 0 {
				t.Fatalf("at %v: fires %v before the tick boundary %v, want none",
					h.clock.Now().Sub(epoch), dueOffsets(got), boundary.Sub(epoch))
			}
		}
		h.advanceTo(boundary)
		got := h.drain()
		if len(got) != 1 || got[0].ID != id || !got[0].Due.Equal(at(due)) {
			t.Fatalf("at %v: fires %v (ids %v), want one of id %d due %v",
				h.clock.Now().Sub(epoch), dueOffsets(got), ids(got), id, due)
		}
		if late := h.clock.Since(got[0].Due); late < 0 || late >= maxLate {
			t.Fatalf("fire due %v came %v late, want within [0, %v)", due, late, maxLate)
		}
	}
}

func ids(fires []wheel.Fire) []wheel.ID {
	var out []wheel.ID
	for _, f := range fires {
		out = append(out, f.ID)
	}
	return out
}

func TestScheduleFiresAtExactTimes(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		tick    time.Duration
		firstAt time.Duration
		period  time.Duration
		want    []time.Duration
	}{
		{name: "on tick boundaries", tick: ms, firstAt: 10 * ms, period: 100 * ms,
			want: []time.Duration{10 * ms, 110 * ms, 210 * ms, 310 * ms}},
		{name: "odd phase and period", tick: ms, firstAt: 3300 * time.Microsecond, period: 7 * ms,
			want: []time.Duration{3300 * time.Microsecond, 10300 * time.Microsecond, 17300 * time.Microsecond}},
		{name: "first fire in the past is late then on grid", tick: ms, firstAt: -5 * ms, period: 10 * ms,
			want: []time.Duration{-5 * ms, 5 * ms, 15 * ms}},
		{name: "period of one tick", tick: ms, firstAt: ms, period: ms,
			want: []time.Duration{ms, 2 * ms, 3 * ms, 4 * ms}},
		{name: "coarse tick", tick: 10 * ms, firstAt: 25 * ms, period: 25 * ms,
			want: []time.Duration{25 * ms, 50 * ms, 75 * ms, 100 * ms}},
		{name: "period beyond level 0", tick: ms, firstAt: 2 * ms, period: 5 * time.Second,
			want: []time.Duration{2 * ms, 5002 * ms, 10002 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithTick(tt.tick), wheel.WithShards(1)).start()
			const id = 7
			if err := h.w.Schedule(id, 0, at(tt.firstAt), tt.period); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			expectFires(t, h, id, tt.tick, tt.want...)
		})
	}
}

func TestNoDriftOver10000Periods(t *testing.T) {
	h := newHarness(t, wheel.WithShards(1)).start()
	const (
		id      = 3
		n       = 10_000
		period  = 7 * time.Millisecond
		firstAt = 2*time.Millisecond + 345_678*time.Nanosecond
	)
	if err := h.w.Schedule(id, 0, at(firstAt), period); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	for k := range n {
		due := at(firstAt + time.Duration(k)*period)
		h.advanceTo(ceilTick(due, time.Millisecond))
		f := h.next()
		if !f.Due.Equal(due) {
			t.Fatalf("fire %d: Due = %v, want %v", k, f.Due.Sub(epoch), due.Sub(epoch))
		}
		if late := h.clock.Since(f.Due); late < 0 || late >= time.Millisecond {
			t.Fatalf("fire %d: %v late, want within [0, 1ms)", k, late)
		}
	}
	st := h.w.Stats()
	if st.Fires != n || st.Missed != 0 {
		t.Errorf("Stats() = fires %d missed %d, want %d 0", st.Fires, st.Missed, n)
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name string
		// cancelIn cancels from inside Dispatch after that many fires; 0
		// cancels from the test before the first fire.
		cancelIn  int
		wantFires int
	}{
		{name: "before the first fire", cancelIn: 0, wantFires: 0},
		{name: "from inside Dispatch", cancelIn: 1, wantFires: 1},
		{name: "from inside Dispatch later", cancelIn: 3, wantFires: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithShards(1))
			const id = 5
			var (
				mu       sync.Mutex
				fires    int
				canceled []bool
			)
			h.onFire = func(f wheel.Fire) {
				mu.Lock()
				defer mu.Unlock()
				fires++
				if fires == tt.cancelIn {
					canceled = append(canceled, h.w.Cancel(f.ID))
				}
			}
			h.start()
			if err := h.w.Schedule(id, 0, at(10*time.Millisecond), 10*time.Millisecond); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			if tt.cancelIn == 0 {
				if !h.w.Cancel(id) {
					t.Fatalf("Cancel() = false, want true")
				}
			}
			for range 10 {
				h.advance(10 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if fires != tt.wantFires {
				t.Errorf("fires = %d, want %d", fires, tt.wantFires)
			}
			if tt.cancelIn > 0 && !cmp.Equal(canceled, []bool{true}) {
				t.Errorf("Cancel() in Dispatch = %v, want [true]", canceled)
			}
			if h.w.Cancel(id) {
				t.Errorf("second Cancel() = true, want false")
			}
			if got := h.w.Stats().Scheduled; got != 0 {
				t.Errorf("Stats().Scheduled = %d, want 0", got)
			}
		})
	}
}

func TestCancelUnknown(t *testing.T) {
	w := wheel.New(clockwork.NewFakeClock(), func([]wheel.Fire) {})
	for _, id := range []wheel.ID{0, 12345, wheel.MaxID, wheel.MaxID + 1} {
		if w.Cancel(id) {
			t.Errorf("Cancel(%d) = true, want false", id)
		}
	}
}

func TestUpdate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		updateAt time.Duration // after the first fire, at 10ms
		period   time.Duration
		want     []time.Duration // fires after the update
	}{
		{name: "shorter period keeps the phase", updateAt: 20 * ms, period: 50 * ms,
			want: []time.Duration{60 * ms, 110 * ms, 160 * ms}},
		{name: "longer period keeps the phase", updateAt: 20 * ms, period: 300 * ms,
			want: []time.Duration{310 * ms, 610 * ms}},
		{name: "next point in the past moves to the first grid point after now", updateAt: 97 * ms, period: 30 * ms,
			want: []time.Duration{100 * ms, 130 * ms, 160 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithShards(1)).start()
			const id = 9
			if err := h.w.Schedule(id, 0, at(10*ms), 100*ms); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			expectFires(t, h, id, ms, 10*ms)
			h.advanceTo(at(tt.updateAt))
			if err := h.w.Update(id, tt.period); err != nil {
				t.Fatalf("Update() = %v", err)
			}
			expectFires(t, h, id, ms, tt.want...)
		})
	}
}

func TestUpdateAndRescheduleErrors(t *testing.T) {
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	if err := w.Schedule(1, 0, epoch, time.Second); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"update unscheduled", func() error { return w.Update(2, time.Second) }, wheel.ErrNotScheduled},
		{"update beyond the slab", func() error { return w.Update(1000, time.Second) }, wheel.ErrNotScheduled},
		{"update zero period", func() error { return w.Update(1, 0) }, wheel.ErrInvalidPeriod},
		{"reschedule unscheduled", func() error { return w.Reschedule(2, epoch, time.Second) }, wheel.ErrNotScheduled},
		{"reschedule negative period", func() error { return w.Reschedule(1, epoch, -time.Second) }, wheel.ErrInvalidPeriod},
		{"update after cancel", func() error { w.Cancel(1); return w.Update(1, time.Second) }, wheel.ErrNotScheduled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReschedule(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t, wheel.WithShards(1)).start()
	const id = 4
	if err := h.w.Schedule(id, 0, at(10*ms), 100*ms); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	expectFires(t, h, id, ms, 10*ms)
	if err := h.w.Reschedule(id, at(35*ms), 20*ms); err != nil {
		t.Fatalf("Reschedule() = %v", err)
	}
	expectFires(t, h, id, ms, 35*ms, 55*ms, 75*ms)
	// Rescheduling to an earlier time than the sleeping driver's deadline
	// must wake it.
	if err := h.w.Reschedule(id, at(200*ms), time.Hour); err != nil {
		t.Fatalf("Reschedule() = %v", err)
	}
	h.advanceTo(at(100 * ms)) // the driver now sleeps until 200ms
	if err := h.w.Reschedule(id, at(150*ms), time.Hour); err != nil {
		t.Fatalf("Reschedule() = %v", err)
	}
	expectFires(t, h, id, ms, 150*ms)
}

// TestFireCarriesGeneration: a fire carries the generation of the Schedule
// or Spread that made its schedule; Reschedule and Update keep it, and a
// new Schedule of the same ID replaces it.
func TestFireCarriesGeneration(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t, wheel.WithShards(2)).start()
	const id = 5
	steps := []struct {
		name string
		do   func() error
		at   time.Duration // the next fire
		want uint32
	}{
		{"schedule", func() error { return h.w.Schedule(id, 7, at(10*ms), 100*ms) }, 10 * ms, 7},
		{"reschedule keeps it", func() error { return h.w.Reschedule(id, at(20*ms), 100*ms) }, 20 * ms, 7},
		{"update keeps it", func() error { return h.w.Update(id, 50*ms) }, 70 * ms, 7},
		{"schedule again", func() error { return h.w.Schedule(id, 8, at(80*ms), 100*ms) }, 80 * ms, 8},
		{"spread", func() error { return h.w.Spread(id, 1<<32-1, at(100*ms), 100*ms) }, 100*ms + wheel.Phase(id, 100*ms), 1<<32 - 1},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		h.advanceTo(ceilTick(at(st.at), ms))
		got := h.drain()
		if len(got) != 1 || got[0].ID != id || got[0].Due != at(st.at) || got[0].Gen != st.want {
			t.Errorf("%s: fires %+v, want one of id %d due %v with Gen %d", st.name, got, id, st.at, st.want)
		}
	}
}

// TestFiresWhileRunning: the wheel fires an item at every due time,
// whether or not the caller has finished with the previous fire (skipping
// a run still in progress is the caller's decision).
func TestFiresWhileRunning(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t, wheel.WithShards(1)).start()
	const id = 11
	if err := h.w.Schedule(id, 0, at(10*ms), 10*ms); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	for k := 1; k <= 3; k++ {
		expectFires(t, h, id, ms, time.Duration(k)*10*ms)
	}
	if st := h.w.Stats(); st.Fires != 3 || st.Missed != 0 {
		t.Errorf("Stats() = fires %d missed %d, want 3 0", st.Fires, st.Missed)
	}
}

func TestFallingBehindFiresOnceAndCountsMissed(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t, wheel.WithShards(1)).start()
	const id = 2
	if err := h.w.Schedule(id, 0, at(10*ms), 10*ms); err != nil {
		t.Fatalf("Schedule() = %v", err)
	}
	h.advance(55 * ms) // passes 10, 20, 30, 40 and 50ms at once
	got := h.drain()
	if diff := cmp.Diff([]time.Duration{10 * ms}, dueOffsets(got)); diff != "" {
		t.Fatalf("fires (-want +got):\n%s", diff)
	}
	st := h.w.Stats()
	if st.Missed != 4 {
		t.Errorf("Stats().Missed = %d, want 4", st.Missed)
	}
	if st.Lateness.Sum != 45*ms {
		t.Errorf("Stats().Lateness.Sum = %v, want 45ms", st.Lateness.Sum)
	}
	expectFires(t, h, id, ms, 60*ms, 70*ms)
}

func TestLongPeriods(t *testing.T) {
	year := 365 * 24 * time.Hour
	tests := []struct {
		name    string
		firstAt time.Duration
		period  time.Duration
		n       int
	}{
		{name: "hours", firstAt: time.Hour + 7*time.Millisecond, period: 3 * time.Hour, n: 4},
		{name: "beyond one level-1 round", firstAt: time.Minute, period: 30 * time.Hour, n: 3},
		{name: "MaxPeriod", firstAt: year, period: wheel.MaxPeriod, n: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithShards(1)).start()
			const id = 1
			if err := h.w.Schedule(id, 0, at(tt.firstAt), tt.period); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			var want []time.Duration
			for k := range tt.n {
				want = append(want, tt.firstAt+time.Duration(k)*tt.period)
			}
			expectFires(t, h, id, time.Millisecond, want...)
			if st := h.w.Stats(); st.Missed != 0 || st.Fires != uint64(tt.n) {
				t.Errorf("Stats() = fires %d missed %d, want %d 0", st.Fires, st.Missed, tt.n)
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"schedule id above MaxID", func() error { return w.Schedule(wheel.MaxID+1, 0, epoch, time.Second) }, wheel.ErrInvalidID},
		{"spread id above MaxID", func() error { return w.Spread(wheel.MaxID+1, 0, epoch, time.Second) }, wheel.ErrInvalidID},
		{"reschedule id above MaxID", func() error { return w.Reschedule(1<<31, epoch, time.Second) }, wheel.ErrInvalidID},
		{"update id above MaxID", func() error { return w.Update(^wheel.ID(0), time.Second) }, wheel.ErrInvalidID},
		{"zero period", func() error { return w.Schedule(1, 0, epoch, 0) }, wheel.ErrInvalidPeriod},
		{"negative period", func() error { return w.Spread(1, 0, epoch, -time.Second) }, wheel.ErrInvalidPeriod},
		{"period above MaxPeriod", func() error { return w.Schedule(1, 0, epoch, wheel.MaxPeriod+1) }, wheel.ErrInvalidPeriod},
		{"first fire centuries ahead", func() error { return w.Schedule(1, 0, epoch.AddDate(200, 0, 0), time.Second) }, wheel.ErrInvalidTime},
		{"first fire centuries ago", func() error { return w.Schedule(1, 0, epoch.AddDate(-200, 0, 0), time.Second) }, wheel.ErrInvalidTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	if got := w.Stats().Scheduled; got != 0 {
		t.Errorf("Stats().Scheduled = %d after rejected calls, want 0", got)
	}
}

func TestRunStopsEveryGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHarness(t).start()
	for id := range wheel.ID(100) {
		if err := h.w.Spread(id, 0, h.clock.Now(), 10*time.Millisecond); err != nil {
			t.Fatalf("Spread() = %v", err)
		}
	}
	h.w.After(time.Hour, func() {})
	h.advance(25 * time.Millisecond)
	h.stop()
	h.stop = func() {}
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t).start()
	if err := h.w.Run(context.Background()); !errors.Is(err, wheel.ErrRunning) {
		t.Errorf("second Run() = %v, want ErrRunning", err)
	}
}

func TestRunWithCanceledContext(t *testing.T) {
	w := wheel.New(clockwork.NewFakeClock(), func([]wheel.Fire) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if err := w.Run(ctx); err != nil { // may run again
		t.Errorf("Run() again = %v, want nil", err)
	}
}

func TestConcurrentScheduleAndCancel(t *testing.T) {
	h := newHarness(t).start()
	const (
		workers = 8
		perW    = 500
	)
	stopClock := make(chan struct{})
	var clockDone sync.WaitGroup
	clockDone.Go(func() {
		for {
			select {
			case <-stopClock:
				return
			default:
				h.clock.Advance(time.Millisecond)
				h.drain()
				runtime.Gosched()
			}
		}
	})
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for k := range perW {
				id := wheel.ID(g*perW + k)
				now := h.clock.Now()
				if err := h.w.Schedule(id, 0, now.Add(time.Duration(k%7)*time.Millisecond), 3*time.Millisecond); err != nil {
					t.Errorf("Schedule(%d) = %v", id, err)
				}
				if k%3 == 0 {
					_ = h.w.Update(id, 5*time.Millisecond)
				}
				if k%2 == 0 && !h.w.Cancel(id) {
					t.Errorf("Cancel(%d) = false, want true", id)
				}
				h.w.Stats()
			}
		})
	}
	wg.Wait()
	close(stopClock)
	clockDone.Wait()
	if got, want := h.w.Stats().Scheduled, workers*perW/2; got != want {
		t.Errorf("Stats().Scheduled = %d, want %d", got, want)
	}
}

func TestScheduleDoesNotAllocate(t *testing.T) {
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	const n = 1000
	for id := range wheel.ID(n) { // grow the slabs
		if err := w.Schedule(id, 0, epoch, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var id wheel.ID
	allocs := testing.AllocsPerRun(1000, func() {
		id = (id + 1) % n
		_ = w.Schedule(id, 0, epoch.Add(time.Duration(id)*time.Millisecond), time.Second)
		_ = w.Spread(id, 0, epoch, time.Second)
		_ = w.Update(id, 2*time.Second)
		_ = w.Reschedule(id, epoch, time.Second)
		w.Cancel(id)
		_ = w.Schedule(id, 0, epoch, time.Second)
		_ = w.Stats()
	})
	if allocs != 0 {
		t.Errorf("allocations per Schedule/Spread/Update/Reschedule/Cancel/Done/Stats = %v, want 0", allocs)
	}
}

func TestSchedulerStatePerItem(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100k items")
	}
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	for id := range wheel.ID(n) {
		if err := w.Spread(id, 0, epoch, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perItem := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("scheduler state: %.1f bytes per item", perItem)
	if perItem > 64 {
		t.Errorf("scheduler state = %.1f bytes per item, want <= 64", perItem)
	}
	runtime.KeepAlive(w)
}

func BenchmarkSchedule(b *testing.B) {
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	const n = 100_000
	for id := range wheel.ID(n) { // grow the slabs first; b.Loop starts the timer
		_ = w.Schedule(id, 0, epoch, 100*time.Millisecond)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := wheel.ID(i % n)
		_ = w.Schedule(id, 0, epoch.Add(time.Duration(i)*time.Microsecond), 100*time.Millisecond)
	}
}

func BenchmarkCancel(b *testing.B) {
	w := wheel.New(clockwork.NewFakeClockAt(epoch), func([]wheel.Fire) {})
	const n = 100_000
	schedule := func() {
		for id := range wheel.ID(n) {
			_ = w.Spread(id, 0, epoch, 100*time.Millisecond)
		}
	}
	schedule()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := wheel.ID(i % n)
		if id == 0 && i > 0 {
			b.StopTimer()
			schedule()
			b.StartTimer()
		}
		w.Cancel(id)
	}
}
