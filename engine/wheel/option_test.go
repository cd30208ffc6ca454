package wheel_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

func TestWithShards(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	tests := []struct {
		name string
		opts []wheel.Option
		want int
	}{
		{name: "default is GOMAXPROCS", want: procs},
		{name: "one", opts: []wheel.Option{wheel.WithShards(1)}, want: 1},
		{name: "zero is raised to one", opts: []wheel.Option{wheel.WithShards(0)}, want: 1},
		{name: "capped at GOMAXPROCS", opts: []wheel.Option{wheel.WithShards(procs + 10)}, want: procs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := wheel.New(clockwork.NewFakeClock(), func([]wheel.Fire) {}, tt.opts...)
			if got := w.Shards(); got != tt.want {
				t.Errorf("Shards() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWithTick(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name     string
		opt      wheel.Option
		wantTick time.Duration
	}{
		{name: "below MinTick is raised", opt: wheel.WithTick(time.Nanosecond), wantTick: wheel.MinTick},
		{name: "zero keeps the default", opt: wheel.WithTick(0), wantTick: wheel.DefaultTick},
		{name: "coarse", opt: wheel.WithTick(50 * time.Millisecond), wantTick: 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opt, wheel.WithShards(1)).start()
			// A period of 3.5 ticks puts the fires off the tick grid.
			first, period := tt.wantTick+15*us, 3*tt.wantTick+tt.wantTick/2
			if err := h.w.Schedule(1, 0, at(first), period); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			expectFires(t, h, 1, tt.wantTick, first, first+period, first+2*period)
		})
	}
}

func TestWithSlots(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		slots  int
		period time.Duration
	}{
		// 64 slots: level 0 spans 64ms, level 1 spans 4.096s.
		{name: "within level 0", slots: 64, period: 50 * ms},
		{name: "level 1", slots: 64, period: 3 * time.Second},
		{name: "rounds beyond level 1", slots: 64, period: 10*time.Second + 3*ms},
		{name: "rounded up to a power of two", slots: 100, period: 200 * ms},
		{name: "below MinSlots", slots: 1, period: 100 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, wheel.WithSlots(tt.slots), wheel.WithShards(1)).start()
			first := 7*ms + 1
			if err := h.w.Schedule(1, 0, at(first), tt.period); err != nil {
				t.Fatalf("Schedule() = %v", err)
			}
			var want []time.Duration
			for k := range 5 {
				want = append(want, first+time.Duration(k)*tt.period)
			}
			expectFires(t, h, 1, ms, want...)
		})
	}
}
