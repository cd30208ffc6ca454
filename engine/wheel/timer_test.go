package wheel_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/probed/probed/engine/wheel"
)

// recorder records the fake-clock times at which timer functions run.
type recorder struct {
	mu   sync.Mutex
	h    *harness
	runs map[string][]time.Duration
}

func newRecorder(h *harness) *recorder {
	return &recorder{h: h, runs: make(map[string][]time.Duration)}
}

func (r *recorder) fn(name string) func() {
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.runs[name] = append(r.runs[name], r.h.clock.Since(epoch))
	}
}

func (r *recorder) got() map[string][]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}

func TestAfter(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		after time.Duration
		want  time.Duration // offset from epoch at which f runs
	}{
		{name: "zero fires on the next tick", after: 0, want: ms},
		{name: "negative fires on the next tick", after: -time.Second, want: ms},
		{name: "whole ticks", after: 25 * ms, want: 25 * ms},
		{name: "rounded up to a tick", after: 25*ms + 1, want: 26 * ms},
		{name: "beyond level 0", after: 90 * time.Second, want: 90 * time.Second},
		{name: "longest duration does not overflow", after: math.MaxInt64, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t).start()
			r := newRecorder(h)
			h.w.After(tt.after, r.fn("f"))
			if st := h.w.Stats(); st.Timers != 1 {
				t.Errorf("Stats().Timers = %d, want 1", st.Timers)
			}
			if tt.want < 0 { // never within the test
				h.advance(100 * 365 * 24 * time.Hour)
				if got := r.got(); len(got) != 0 {
					t.Errorf("f ran at %v, want never", got)
				}
				return
			}
			if tt.want > ms {
				h.advanceTo(at(tt.want - 1))
				if got := r.got(); len(got) != 0 {
					t.Fatalf("f ran at %v, before %v", got, tt.want)
				}
			}
			h.advanceTo(at(tt.want))
			h.advance(time.Hour) // and never again
			if diff := cmp.Diff(map[string][]time.Duration{"f": {tt.want}}, r.got()); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if st := h.w.Stats(); st.Timers != 0 {
				t.Errorf("Stats().Timers = %d after firing, want 0", st.Timers)
			}
		})
	}
}

func TestTimerStop(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t).start()
	r := newRecorder(h)

	stopped := h.w.After(10*ms, r.fn("stopped"))
	fired := h.w.After(10*ms, r.fn("fired"))
	if !stopped.Stop() {
		t.Errorf("Stop() before firing = false, want true")
	}
	if stopped.Stop() {
		t.Errorf("second Stop() = true, want false")
	}
	h.advance(10 * ms)
	h.advance(10 * ms)
	if fired.Stop() {
		t.Errorf("Stop() after firing = true, want false")
	}
	// The ids of both timers are recycled; the old handles must not stop
	// the new timers.
	reused := []*wheel.Timer{h.w.After(10*ms, r.fn("new")), h.w.After(10*ms, r.fn("new"))}
	if stopped.Stop() || fired.Stop() {
		t.Errorf("Stop() of a stale timer = true, want false")
	}
	h.advance(10 * ms)
	want := map[string][]time.Duration{"fired": {10 * ms}, "new": {30 * ms, 30 * ms}}
	if diff := cmp.Diff(want, r.got()); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	for _, tm := range reused {
		if tm.Stop() {
			t.Errorf("Stop() of a fired timer = true, want false")
		}
	}
}

func TestAfterFromTimerFunction(t *testing.T) {
	ms := time.Millisecond
	h := newHarness(t).start()
	r := newRecorder(h)
	var count int
	var tick func()
	tick = func() { // a self-rearming timer, as a preStop loop might be
		r.fn("tick")()
		if count++; count < 3 {
			h.w.After(5*ms, tick)
		}
	}
	h.w.After(5*ms, tick)
	for range 6 {
		h.advance(5 * ms)
	}
	if diff := cmp.Diff(map[string][]time.Duration{"tick": {5 * ms, 10 * ms, 15 * ms}}, r.got()); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

func TestAfterPanicsOnNilFunc(t *testing.T) {
	h := newHarness(t)
	defer func() {
		if recover() == nil {
			t.Errorf("After(0, nil) did not panic")
		}
	}()
	h.w.After(0, nil)
}
