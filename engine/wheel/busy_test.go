package wheel

import (
	"sync"
	"testing"
)

func TestBusySet(t *testing.T) {
	var b busySet
	b.clear(5) // no page yet: a no-op
	ids := []int32{0, 63, 64, 65535, 65536, int32(MaxID)}
	for _, i := range ids {
		b.grow(i)
		if b.mark(i) {
			t.Errorf("mark(%d) on a new id = true, want false", i)
		}
		if !b.mark(i) {
			t.Errorf("second mark(%d) = false, want true", i)
		}
	}
	for _, i := range ids {
		b.clear(i)
		if b.mark(i) {
			t.Errorf("mark(%d) after clear = true, want false", i)
		}
	}
	if b.mark(1) || b.mark(62) {
		t.Errorf("neighbours of marked ids are busy")
	}
}

// TestBusySetClearWithoutLock runs clear concurrently with mark, as Done
// does with the driver, for the race detector.
func TestBusySetClearWithoutLock(t *testing.T) {
	var b busySet
	b.grow(1000)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 10_000 {
			b.clear(7)
		}
	})
	var mu sync.Mutex // the shard's mutex, which mark requires
	for range 10_000 {
		mu.Lock()
		b.mark(7)
		b.mark(8)
		mu.Unlock()
	}
	wg.Wait()
	if !b.mark(8) {
		t.Errorf("mark(8) = false after marking it, want true")
	}
}
