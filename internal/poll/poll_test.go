package poll_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// calling goroutine, as testing's does.
type recorder struct {
	testing.TB
	failed atomic.Pointer[string]
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.failed.Store(&msg)
	runtime.Goexit()
}

func run(f func(tb testing.TB)) *string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed.Load()
}

func TestPoll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		wait     func(tb testing.TB)
		wantFail string // "" when it must hold
	}{
		{"true at once", func(tb testing.TB) { poll.Until(tb, "x", time.Second, func() bool { return true }) }, ""},
		{"true after some polls", func(tb testing.TB) {
			var n atomic.Int32
			poll.Until(tb, "x", 10*time.Second, func() bool { return n.Add(1) == 3 })
		}, ""},
		{"never true", func(tb testing.TB) {
			poll.Until(tb, "the thing", 30*time.Millisecond, func() bool { return false })
		}, "waiting for the thing (30ms): not yet"},
		{"met after some polls", func(tb testing.TB) {
			var n atomic.Int32
			poll.UntilMet(tb, "x", 10*time.Second, func() string {
				if n.Add(1) < 3 {
					return "missing"
				}
				return ""
			})
		}, ""},
		{"never met says the last word", func(tb testing.TB) {
			poll.UntilMet(tb, "3 replicas", 30*time.Millisecond, func() string { return "2 of 3" })
		}, "waiting for 3 replicas (30ms): 2 of 3"},
		{"every: true after some polls", func(tb testing.TB) {
			var n atomic.Int32
			poll.Every(time.Millisecond).Until(tb, "x", 10*time.Second, func() bool { return n.Add(1) == 3 })
		}, ""},
		{"every: never met", func(tb testing.TB) {
			poll.Every(5*time.Millisecond).UntilMet(tb, "3 replicas", 30*time.Millisecond, func() string { return "2 of 3" })
		}, "waiting for 3 replicas (30ms): 2 of 3"},
		{"holds", func(tb testing.TB) {
			poll.Holds(tb, "no owner", 30*time.Millisecond, func() string { return "" })
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := run(tt.wait)
			switch {
			case tt.wantFail == "" && got != nil:
				t.Errorf("failed with %q; want it to hold", *got)
			case tt.wantFail != "" && got == nil:
				t.Errorf("held; want the failure %q", tt.wantFail)
			case tt.wantFail != "" && *got != tt.wantFail:
				t.Errorf("failed with %q; want %q", *got, tt.wantFail)
			}
		})
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	if err := poll.Wait("x", 10*time.Second, func() bool { return n.Add(1) == 3 }); err != nil {
		t.Errorf("true after some polls: %v", err)
	}
	err := poll.Wait("the thing", 30*time.Millisecond, func() bool { return false })
	if !errors.Is(err, poll.ErrNotMet) || err.Error() != "waiting for the thing (30ms): condition not met" {
		t.Errorf("never true: %v; want ErrNotMet naming the thing", err)
	}
}

// TestHoldsForItsBound: Holds polls its condition until its bound has
// passed, not less, and fails at the first poll that finds it broken.
func TestHoldsForItsBound(t *testing.T) {
	t.Parallel()
	const bound = 50 * time.Millisecond
	var polls atomic.Int32
	began := time.Now()
	if got := run(func(tb testing.TB) {
		poll.Holds(tb, "quiet", bound, func() string { polls.Add(1); return "" })
	}); got != nil {
		t.Fatalf("failed with %q; want it to hold", *got)
	}
	if took := time.Since(began); took < bound || polls.Load() < 2 {
		t.Errorf("returned after %v and %d polls; want at least %v and more than one poll", took, polls.Load(), bound)
	}
	var n atomic.Int32
	got := run(func(tb testing.TB) {
		poll.Holds(tb, "quiet", time.Minute, func() string {
			if n.Add(1) == 3 {
				return "a write"
			}
			return ""
		})
	})
	if got == nil || n.Load() != 3 || !strings.HasPrefix(*got, "quiet, for 1m0s: after ") || !strings.HasSuffix(*got, ": a write") {
		t.Errorf("failure %v after %d polls; want one at the third poll saying what happened", got, n.Load())
	}
}
