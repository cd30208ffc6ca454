package wheel

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// shard is one lock's worth of the wheel: its items and its timers. The
// wheel's one driver goroutine visits every shard on each tick with work.
type shard struct {
	w     *Wheel
	index uint32 // id % nshards of the items of this shard

	mu        sync.Mutex
	items     *ring    // guarded by mu
	timers    *ring    // guarded by mu
	timerFns  []func() // guarded by mu; per timer id
	timerGens []uint32 // guarded by mu; per timer id
	freeTimer []int32  // guarded by mu; unused timer ids
	stats     counters // guarded by mu

	// earliest is at most the first tick with work in the shard
	// (math.MaxInt64 when it has none): lowered by every insert before it
	// asks the driver for a wake-up, set exactly by the driver's visits and
	// by a removal of the entry it stood for. Written under mu; read
	// without it by a removal in another shard (Wheel.removed).
	earliest atomic.Int64

	// Batches, used only by the driver goroutine and reused.
	due   []entry
	fires []Fire
	fns   []func()

	_ [64]byte // keep the next shard's mutex off this cache line
}

func newShard(w *Wheel, index uint32, slots int) *shard {
	s := &shard{
		w:      w,
		index:  index,
		items:  newRing(w.tick, slots, 0),
		timers: newRing(w.tick, min(slots, 256), 0),
	}
	s.earliest.Store(math.MaxInt64)
	return s
}

// pass handles everything due in the shard up to tick now (nowNs in ns):
// one tick at a time, it collects the due fires and, with no lock held,
// hands them to Dispatch (with the due timer functions after the first
// tick). It then sets s.earliest to the shard's next tick with work.
func (s *shard) pass(now, nowNs int64) {
	s.mu.Lock()
	s.fireTimersLocked(now)
	for {
		more := s.fireItemsLocked(now, nowNs)
		if len(s.fires) > 0 || len(s.fns) > 0 {
			s.mu.Unlock()
			s.deliver()
			s.mu.Lock()
		}
		if !more {
			break
		}
	}
	defer s.mu.Unlock()
	s.nextLocked()
}

// nextLocked sets s.earliest to the shard's next tick with work
// (math.MaxInt64 when the shard is empty).
func (s *shard) nextLocked() {
	next, ok := s.items.next()
	if t, tok := s.timers.next(); tok && (!ok || t < next) {
		next, ok = t, true
	}
	if !ok {
		next = math.MaxInt64
	}
	s.earliest.Store(next)
}

// insertedLocked records that the shard has work at tick t, then asks the
// driver to wake up for it if it sleeps longer (Wheel.wakeFor).
func (s *shard) insertedLocked(t int64) {
	if t < s.earliest.Load() {
		s.earliest.Store(t)
	}
	s.w.wakeFor(t)
}

// removedLocked records that e, which fired next at tick t of ring r, is
// gone; if it was the shard's earliest work, the shard's next tick is
// found again, and the driver, if it sleeps until t, re-armed for the
// earliest work left in any shard (Wheel.removed).
func (s *shard) removedLocked(r *ring, e entry) {
	t := r.fireTick(e.due)
	if t > s.earliest.Load() {
		return
	}
	s.nextLocked()
	s.w.removed(t)
}

// deliver hands the collected fires to Dispatch and runs the collected
// timer functions, then empties both batches.
func (s *shard) deliver() {
	if len(s.fires) > 0 {
		s.w.dispatch(s.fires)
		s.fires = shrink(s.fires)
	}
	for i, f := range s.fns {
		f()
		s.fns[i] = nil
	}
	s.fns = s.fns[:0]
}

// retainBatch is the batch capacity kept however little of it is used.
const retainBatch = 4096

// shrink empties a batch, and drops its array if a rare large batch (a
// catch-up after a long stall) left it much larger than the current one.
func shrink[T any](batch []T) []T {
	if cap(batch) > retainBatch && len(batch) < cap(batch)/8 {
		return nil
	}
	return batch[:0]
}

// fireItemsLocked fires or skips the items of the next tick with due items
// up to tick now and reinserts them at their next grid point after tick
// now. It reports whether ticks up to now remain.
func (s *shard) fireItemsLocked(now, nowNs int64) (more bool) {
	s.due, more = s.items.advance(now, s.due[:0])
	edge := now * s.w.tick
	for k := range s.due {
		e := &s.due[k]
		s.fires = append(s.fires, Fire{
			ID:  ID(uint32(e.id)*s.w.nshards + s.index),
			Gen: e.gen,
			Due: s.w.epoch.Add(time.Duration(e.due)),
		})
		s.stats.observe(nowNs - e.due)
		next := e.due + e.period
		if next <= edge {
			n := (edge-e.due)/e.period + 1
			s.stats.missed += uint64(n - 1)
			next = e.due + n*e.period
		}
		e.due = next
		s.items.insert(*e)
	}
	s.due = shrink(s.due)
	return more
}

// growLocked makes item i addressable.
func (s *shard) growLocked(i int32) {
	s.items.grow(i)
}

// insertLocked inserts the item of e, which is addressable and not
// scheduled.
func (s *shard) insertLocked(e entry) {
	s.insertedLocked(s.items.insert(e))
}

// moveLocked inserts the item of e, whose entry old was just removed, and
// then records old's removal: in this order, so that moving the work the
// driver sleeps until to a later tick re-arms the driver for the new
// tick rather than waking it.
func (s *shard) moveLocked(old, e entry) {
	s.insertLocked(e)
	s.removedLocked(s.items, old)
}
