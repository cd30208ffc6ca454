package wheel

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// idleSleep is how long a driver with nothing scheduled sleeps; inserting an
// item wakes it earlier.
const idleSleep = time.Hour

// shard is one lock's worth of the wheel: its items, its timers and the
// state of its driver goroutine.
type shard struct {
	w     *Wheel
	index uint32        // id % nshards of the items of this shard
	wake  chan struct{} // one slot: an earlier item was inserted
	idle  int64         // idleSleep in ticks

	mu        sync.Mutex
	items     *ring           // guarded by mu
	busy      busySet         // grown under mu; cleared by Done without it
	timers    *ring           // guarded by mu
	timerFns  []func()        // guarded by mu; per timer id
	timerGens []uint32        // guarded by mu; per timer id
	freeTimer []int32         // guarded by mu; unused timer ids
	stats     counters        // guarded by mu
	timer     clockwork.Timer // guarded by mu; written only by the driver, nil when it is not running
	armed     bool            // guarded by mu; timer is set for armedTick and has not fired
	armedTick int64           // guarded by mu
	passing   bool            // guarded by mu; the driver is in a pass and re-arms at its end

	// Batches, used only by the driver goroutine and reused.
	due   []entry
	fires []Fire
	fns   []func()

	_ [64]byte // keep the next shard's mutex off this cache line
}

func newShard(w *Wheel, index uint32, slots int) *shard {
	return &shard{
		w:      w,
		index:  index,
		wake:   make(chan struct{}, 1),
		idle:   max(1, int64(idleSleep)/w.tick),
		items:  newRing(w.tick, slots, 0),
		timers: newRing(w.tick, min(slots, 256), 0),
	}
}

// run is the driver: it handles what is due, sleeps until the next due slot
// or a wake-up, and repeats until ctx is done.
func (s *shard) run(ctx context.Context) {
	defer s.stop()
	select { // a wake-up sent before Run is stale: the first pass sees all
	case <-s.wake:
	default:
	}
	fired := false
	for {
		for s.pass(fired) { // behind: the next tick is already due
			fired = false
			if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.timer.Chan():
			fired = true
		case <-s.wake:
			fired = false
		}
	}
}

// stop releases the driver's timer.
func (s *shard) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer, s.armed = nil, false
	}
}

// pass handles everything due: one tick at a time, it collects the due
// fires and, with no lock held, hands them to Dispatch (with the due timer
// functions after the first tick). Then it re-arms the timer for the next
// tick with work. fired says that the timer has fired. pass reports true,
// without arming the timer, when that next tick is already due.
//
// The timer is re-armed only after Dispatch returns, so with a fake clock a
// driver counts as parked only once it has delivered everything due.
func (s *shard) pass(fired bool) (again bool) {
	s.mu.Lock()
	if fired {
		s.armed = false
	}
	s.passing = true
	nowNs := int64(s.w.clock.Since(s.w.epoch))
	now := nowNs / s.w.tick
	s.fireTimersLocked(now)
	for {
		more := s.fireItemsLocked(now, nowNs)
		s.mu.Unlock()
		s.deliver()
		s.mu.Lock()
		if !more {
			break
		}
	}
	defer s.mu.Unlock()
	s.passing = false
	return !s.armLocked()
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
		if s.busy.mark(e.id) {
			s.stats.skipped++
		} else {
			s.fires = append(s.fires, Fire{
				ID:  ID(uint32(e.id)*s.w.nshards + s.index),
				Due: s.w.epoch.Add(time.Duration(e.due)),
			})
			s.stats.observe(nowNs - e.due)
		}
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

// armLocked sets the timer for the next tick with work, unless it is
// already set for it; an idle shard sleeps for idleSleep. It reports false,
// leaving the timer alone, if that tick has already begun.
func (s *shard) armLocked() bool {
	next, ok := s.items.next()
	if t, tok := s.timers.next(); tok && (!ok || t < next) {
		next, ok = t, true
	}
	if !ok {
		next = s.items.cur + s.idle
	}
	if s.armed && next == s.armedTick {
		return true
	}
	d := time.Duration(next*s.w.tick - int64(s.w.clock.Since(s.w.epoch)))
	if d <= 0 {
		return false
	}
	if s.timer == nil {
		s.timer = s.w.clock.NewTimer(d)
	} else {
		if !s.timer.Stop() {
			// Drop a value sent before the Stop, so that it cannot wake the
			// driver for a deadline that no longer holds.
			select {
			case <-s.timer.Chan():
			default:
			}
		}
		s.timer.Reset(d)
	}
	s.armed, s.armedTick = true, next
	return true
}

// growLocked makes item i addressable.
func (s *shard) growLocked(i int32) {
	s.items.grow(i)
	s.busy.grow(i)
}

// insertLocked inserts item i, which is addressable and not scheduled,
// with the given schedule.
func (s *shard) insertLocked(i int32, due, period int64) {
	s.wakeForLocked(s.items.insert(entry{due: due, period: period, id: i}))
}

// wakeForLocked wakes the driver if something now fires at tick t, before
// the timer the driver sleeps on; a driver in a pass re-arms at its end
// anyway. It stops that timer first, so that a fake clock sees the driver
// as busy until it has re-armed.
func (s *shard) wakeForLocked(t int64) {
	if s.passing || s.armed && t >= s.armedTick {
		return
	}
	if s.armed {
		s.timer.Stop()
		s.armed = false
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
