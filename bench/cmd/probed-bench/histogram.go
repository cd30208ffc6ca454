package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the precision of a Histogram: values below 2^subBits units
// have buckets of exactly one unit; above, every doubling is split into
// 2^(subBits-1) buckets, a relative precision of 1/128 (0.8%).
const subBits = 8

// Histogram is a log-linear histogram of durations with a fixed memory
// footprint, safe for concurrent use. Record costs one atomic add (and, for
// a new maximum, a compare-and-swap) and never allocates. Values above the
// range given to NewHistogram are counted in the last bucket; the exact
// maximum is kept apart.
type Histogram struct {
	shift  uint            // log2 of the unit, the resolution of the linear range, in ns
	unit   int64           // ns
	counts []atomic.Uint64 // per bucket
	max    atomic.Int64    // ns
}

// NewHistogram returns a histogram holding values up to at least limit,
// with buckets of one unit up to 2^subBits units and of 0.8% above. The
// unit is resolution rounded down to a power of two nanoseconds (10µs gives
// 8.192µs), so that recording needs no division.
func NewHistogram(resolution, limit time.Duration) *Histogram {
	shift := uint(bits.Len64(uint64(max(resolution, 1)))) - 1
	h := &Histogram{shift: shift, unit: 1 << shift}
	h.counts = make([]atomic.Uint64, h.index(int64(limit))+1)
	return h
}

// index returns the bucket of v ns (not clamped to the buckets).
func (h *Histogram) index(v int64) int {
	u := uint64(max(v, 0)) >> h.shift
	if u < 1<<subBits {
		return int(u)
	}
	shift := bits.Len64(u) - subBits // >= 1
	top := u >> shift                // in [2^(subBits-1), 2^subBits)
	return 1<<subBits + (shift-1)<<(subBits-1) + int(top) - 1<<(subBits-1)
}

// upper returns the largest value, in ns, of bucket i.
func (h *Histogram) upper(i int) int64 {
	if i < 1<<subBits {
		return int64(i+1)*h.unit - 1
	}
	k := i - 1<<subBits
	shift := k>>(subBits-1) + 1
	top := int64(k&(1<<(subBits-1)-1)) + 1<<(subBits-1)
	return ((top+1)<<shift)*h.unit - 1
}

// Record adds one observation; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	i := min(h.index(v), len(h.counts)-1)
	h.counts[i].Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Merge adds the observations of o, which must have the same unit and
// range, to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		h.counts[i].Add(o.counts[i].Load())
	}
	for {
		m, om := h.max.Load(), o.max.Load()
		if om <= m || h.max.CompareAndSwap(m, om) {
			return
		}
	}
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Max returns the largest observation, or 0 if there is none.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns an upper bound of the q-quantile (0 < q <= 1) of the
// observations: the top of the bucket holding it, at most Max, or Max if it
// is in the last bucket, which also holds every value beyond the range. It
// returns 0 if there are no observations.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i := range h.counts {
		if seen += h.counts[i].Load(); seen >= rank {
			if i == len(h.counts)-1 {
				break
			}
			return min(time.Duration(h.upper(i)), h.Max())
		}
	}
	return h.Max()
}
