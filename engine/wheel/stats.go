package wheel

import (
	"math"
	"time"
)

// NumLatenessBuckets is the number of buckets of the lateness histogram.
const NumLatenessBuckets = 9

// latenessBounds are the upper bounds of the lateness buckets; the last one
// stands for +Inf.
var latenessBounds = [NumLatenessBuckets]time.Duration{
	500 * time.Microsecond,
	time.Millisecond,
	2500 * time.Microsecond,
	5 * time.Millisecond,
	10 * time.Millisecond,
	25 * time.Millisecond,
	50 * time.Millisecond,
	100 * time.Millisecond,
	math.MaxInt64,
}

// Stats is a snapshot of the wheel's counters, summed over its shards.
// Fires, Wakes, Missed and the histogram only go up; Scheduled and Timers
// are current counts.
type Stats struct {
	Fires     uint64 // fires handed to Dispatch
	Wakes     uint64 // times the driver woke up: at a tick with work, or for an insert before the tick it slept until
	Missed    uint64 // grid points passed over while a driver was behind
	Scheduled int    // items currently scheduled
	Timers    int    // one-shot timers pending
	Lateness  Histogram
}

// Histogram is a cumulative histogram of fire lateness (the time from a
// fire's Due to its collection by the driver), in the Prometheus style.
type Histogram struct {
	// Bounds are the bucket upper bounds; the last is math.MaxInt64 (+Inf).
	Bounds [NumLatenessBuckets]time.Duration
	// Counts[i] is the number of fires with lateness <= Bounds[i]; the last
	// one is the total.
	Counts [NumLatenessBuckets]uint64
	// Sum is the total lateness of all fires.
	Sum time.Duration
}

// Count returns the number of observations.
func (h Histogram) Count() uint64 { return h.Counts[NumLatenessBuckets-1] }

// counters are the statistics of one shard, guarded by its mutex.
type counters struct {
	fires, missed uint64
	late          [NumLatenessBuckets]uint64 // not cumulative
	lateSum       int64
}

// observe records one fire that is late by ns nanoseconds.
func (c *counters) observe(ns int64) {
	c.fires++
	c.lateSum += ns
	b := 0
	for b < NumLatenessBuckets-1 && ns > int64(latenessBounds[b]) {
		b++
	}
	c.late[b]++
}

// addTo adds c to s.
func (c *counters) addTo(s *Stats) {
	s.Fires += c.fires
	s.Missed += c.missed
	s.Lateness.Sum += time.Duration(c.lateSum)
	for i, n := range c.late {
		s.Lateness.Counts[i] += n
	}
}

// Stats returns the current counters. It locks each shard briefly and does
// not allocate.
func (w *Wheel) Stats() Stats {
	st := Stats{Lateness: Histogram{Bounds: latenessBounds}}
	for _, s := range w.shards {
		s.mu.Lock()
		s.stats.addTo(&st)
		st.Scheduled += s.items.linked
		st.Timers += s.timers.linked
		s.mu.Unlock()
	}
	st.Wakes = w.drv.wakes.Load()
	for i := 1; i < NumLatenessBuckets; i++ {
		st.Lateness.Counts[i] += st.Lateness.Counts[i-1]
	}
	return st
}
