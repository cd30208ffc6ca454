package engine

import (
	"sync"
	"testing"
)

func TestPoolReusesWorkersAndCloses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := 0
	release := make(chan struct{})
	p := newPool(2, func(j job) {
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
