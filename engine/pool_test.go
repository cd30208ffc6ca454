package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
)

func TestPoolReusesWorkersAndCloses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := 0
	release := make(chan struct{})
	p := newPool(2, 0, func(j job) {
		if j.gen == 1 {
			<-release // a hanging run
		}
		mu.Lock()
		ran++
		mu.Unlock()
	})
	if !p.submit(job{gen: 1}) {
		t.Fatal("submit refused")
	}
	// The hanging run holds its worker: others get new workers.
	for range 10 {
		if !p.submit(job{gen: 2}) {
			t.Fatal("submit refused")
		}
	}
	close(release)
	p.close()
	if ran != 11 {
		t.Errorf("ran %d jobs, want 11", ran)
	}
	if p.submit(job{gen: 2}) {
		t.Error("submit accepted after close")
	}
	if n := p.idle.Load(); n != 0 {
		t.Errorf("%d workers idle after close", n)
	}
}

// TestPoolSizedByDemand: a burst of 10 concurrent runs leaves 10 idle
// workers; resize keeps keepIdle plus the most runs seen in flight over
// its last resizeSamples calls (a second of the executor's), so the idle
// workers follow the demand down within those calls, never below
// keepIdle, and a worker finishing beyond the bound exits.
func TestPoolSizedByDemand(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started sync.WaitGroup
	p := newPool(256, 2, func(j job) {
		if j.gen == 1 {
			started.Done()
			<-release
		}
	})
	defer p.close()
	started.Add(10)
	for range 10 {
		p.submit(job{gen: 1})
	}
	started.Wait()
	waitIdle := func(want int32) {
		t.Helper()
		poll.UntilMet(t, "idle workers", 10*time.Second, func() string {
			if got := p.idle.Load(); got != want {
				return fmt.Sprintf("%d workers idle, want %d", got, want)
			}
			return ""
		})
	}
	p.resize(10) // the burst in flight
	close(release)
	waitIdle(10) // 10 ≤ keepIdle 2 + 10
	p.resize(3)
	waitIdle(10) // the burst is still within the last resizeSamples calls
	p.resize(0)
	p.resize(0)
	waitIdle(10)
	p.resize(0) // the burst's sample is gone: 3 in flight is the most seen
	waitIdle(5)
	p.resize(0)
	waitIdle(2) // a quiet second: keepIdle
	p.resize(0)
	waitIdle(2) // never below keepIdle

	// A worker finishing beyond the bound exits rather than idling.
	started.Add(4)
	release = make(chan struct{})
	for range 4 {
		p.submit(job{gen: 1})
	}
	started.Wait()
	close(release)
	waitIdle(2)
}
