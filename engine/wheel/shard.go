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
	timers    *ring           // guarded by mu
	timerFns  []func()        // guarded by mu; indexed like timers.nodes
	timerGens []uint32        // guarded by mu; indexed like timers.nodes
	freeTimer []int32         // guarded by mu; unused timer nodes
	stats     counters        // guarded by mu
	timer     clockwork.Timer // guarded by mu; written only by the driver, nil when it is not running
	armed     bool            // guarded by mu; timer is set for armedTick and has not fired
	armedTick int64           // guarded by mu
	passing   bool            // guarded by mu; the driver is in a pass and re-arms at its end

	// Batches, used only by the driver goroutine and reused.
	due   []int32
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

// pass collects everything due, then with no lock held hands the fires to
// Dispatch and runs the due timer functions, and finally re-arms the timer
// for the next tick with work. fired says that the timer has fired. pass
// reports true, without arming the timer, when that next tick is already
// due.
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
	s.fireItemsLocked(now, nowNs)
	s.fireTimersLocked(now)
	s.mu.Unlock()

	if len(s.fires) > 0 {
		s.w.dispatch(s.fires)
		s.fires = s.fires[:0]
	}
	for i, f := range s.fns {
		f()
		s.fns[i] = nil
	}
	s.fns = s.fns[:0]

	s.mu.Lock()
	defer s.mu.Unlock()
	s.passing = false
	return !s.armLocked()
}

// fireItemsLocked fires or skips the items due by tick now and relinks them
// at their next grid point after tick now.
func (s *shard) fireItemsLocked(now, nowNs int64) {
	s.due = s.items.advance(now, s.due[:0])
	edge := now * s.w.tick
	nodes := s.items.nodes
	for _, i := range s.due {
		n := &nodes[i]
		if n.busy {
			s.stats.skipped++
		} else {
			n.busy = true
			s.fires = append(s.fires, Fire{
				ID:  ID(uint32(i)*s.w.nshards + s.index),
				Due: s.w.epoch.Add(time.Duration(n.due)),
			})
			s.stats.observe(nowNs - n.due)
		}
		next := n.due + n.period
		if next <= edge {
			k := (edge-n.due)/n.period + 1
			s.stats.missed += uint64(k - 1)
			next = n.due + k*n.period
		}
		n.due = next
		s.items.link(i)
	}
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

// scheduledLocked reports whether item i is scheduled.
func (s *shard) scheduledLocked(i int32) bool {
	return int(i) < len(s.items.nodes) && s.items.nodes[i].slot != nilIndex
}

// setLocked links the unlinked item i with the given schedule.
func (s *shard) setLocked(i int32, due, period int64) {
	n := &s.items.nodes[i]
	n.due, n.period = due, period
	s.wakeForLocked(s.items.link(i))
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
