package wheel

import "time"

// Timer is a one-shot timer created by After.
type Timer struct {
	s   *shard
	i   int32
	gen uint32
}

// After calls f once, on a driver goroutine, at the first tick at least d
// from now; After(0) fires on the next tick. f must not block. After
// allocates the returned Timer and nothing else in steady state. It panics
// if f is nil.
func (w *Wheel) After(d time.Duration, f func()) *Timer {
	if f == nil {
		panic("wheel: After with nil func")
	}
	due := int64(w.clock.Since(w.epoch)) + int64(min(max(d, 0), maxOffset))
	s := w.shards[w.next.Add(1)%w.nshards]
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.newTimerLocked(f)
	s.insertedLocked(s.timers.insert(entry{due: due, id: i}))
	return &Timer{s: s, i: i, gen: s.timerGens[i]}
}

// Stop prevents the timer from firing. It reports whether it did so: false
// means the timer has already fired (f has run or is about to) or was
// stopped.
func (t *Timer) Stop() bool {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timerGens[t.i] != t.gen {
		return false
	}
	e, ok := s.timers.remove(t.i)
	if !ok {
		return false
	}
	s.freeTimerLocked(t.i)
	s.removedLocked(s.timers, e)
	return true
}

// newTimerLocked returns an unused timer id, not in the ring, holding f.
func (s *shard) newTimerLocked(f func()) int32 {
	var i int32
	if n := len(s.freeTimer); n > 0 {
		i = s.freeTimer[n-1]
		s.freeTimer = s.freeTimer[:n-1]
	} else {
		i = int32(len(s.timerFns))
		s.timers.grow(i)
		s.timerFns = append(s.timerFns, nil)
		s.timerGens = append(s.timerGens, 0)
	}
	s.timerFns[i] = f
	return i
}

// freeTimerLocked recycles timer id i; Timers holding it go stale.
func (s *shard) freeTimerLocked(i int32) {
	s.timerFns[i] = nil
	s.timerGens[i]++
	s.freeTimer = append(s.freeTimer, i)
}

// fireTimersLocked queues the functions of the timers due by tick now and
// frees their ids.
func (s *shard) fireTimersLocked(now int64) {
	for more := true; more; {
		s.due, more = s.timers.advance(now, s.due[:0])
		for _, e := range s.due {
			s.fns = append(s.fns, s.timerFns[e.id])
			s.freeTimerLocked(e.id)
		}
	}
}
