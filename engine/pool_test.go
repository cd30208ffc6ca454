package engine

import (
	"sync"
	"testing"
	"time"
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

// TestPoolTrimEndsWorkersABurstLeftIdle: a burst of 10 concurrent runs
// leaves 10 idle workers; the first trim after it retires none (the burst
// needed them all), the second retires those beyond keepIdle that no run
// needed in between, and a run in between keeps its worker.
func TestPoolTrimEndsWorkersABurstLeftIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started sync.WaitGroup
	ran := make(chan struct{}, 1)
	p := newPool(256, 2, func(j job) {
		if j.gen == 1 {
			started.Done()
			<-release
		} else {
			ran <- struct{}{}
		}
	})
	defer p.close()
	started.Add(10)
	for range 10 {
		p.submit(job{gen: 1})
	}
	started.Wait()
	close(release)
	waitIdle := func(want int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); p.idle.Load() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("%d workers idle, want %d", p.idle.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitIdle(10)
	p.trim() // the burst needed every worker since the start
	waitIdle(10)
	p.submit(job{gen: 2}) // one run between the trims: 9 stayed idle throughout
	<-ran
	waitIdle(10)
	p.trim()
	waitIdle(3) // 9 − keepIdle 2 = 7 retired
	p.trim()
	waitIdle(2)
	p.trim()
	waitIdle(2) // never below keepIdle
}
