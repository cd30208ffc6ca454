package main

import (
	"sync"
	"testing"
	"time"
)

func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	h := NewHistogram(10*time.Microsecond, time.Minute)
	if h.unit != 8192 {
		t.Fatalf("unit = %d, want 8192 (10µs rounded down to a power of two)", h.unit)
	}
	// Every value lands in a bucket whose range holds it, buckets are in
	// order, and above the linear range they are at most 1/128 wide.
	prevUpper := int64(-1)
	for i := range len(h.counts) {
		upper := h.upper(i)
		if upper <= prevUpper {
			t.Fatalf("bucket %d: upper %d <= previous %d", i, upper, prevUpper)
		}
		for _, v := range []int64{prevUpper + 1, upper} {
			if got := h.index(v); got != i {
				t.Fatalf("index(%d) = %d, want %d (bucket range %d..%d)", v, got, i, prevUpper+1, upper)
			}
		}
		if width := upper - prevUpper; i >= 1<<subBits && float64(width) > float64(upper)/128 {
			t.Fatalf("bucket %d is %d wide at %d, want <= 1/128 of it", i, width, upper)
		}
		prevUpper = upper
	}
	if prevUpper < int64(time.Minute) {
		t.Errorf("last bucket ends at %v, want >= 1m", time.Duration(prevUpper))
	}
}

func TestHistogramQuantiles(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		values  []time.Duration
		q       float64
		want    time.Duration
		within  time.Duration
		wantMax time.Duration
	}{
		{name: "empty", q: 0.5, want: 0},
		{name: "single", values: []time.Duration{3 * ms}, q: 0.99, want: 3 * ms, wantMax: 3 * ms},
		{name: "median of 1..1000µs", values: micros(1, 1000), q: 0.5, want: 500 * time.Microsecond, within: 10 * time.Microsecond, wantMax: ms},
		{name: "p99 of 1..1000µs", values: micros(1, 1000), q: 0.99, want: 990 * time.Microsecond, within: 10 * time.Microsecond, wantMax: ms},
		{name: "p99 in the log range", values: []time.Duration{ms, 2 * time.Second}, q: 0.99, want: 2 * time.Second, within: 16 * ms, wantMax: 2 * time.Second},
		{name: "beyond the limit counts, max stays exact", values: []time.Duration{time.Hour}, q: 0.5, want: time.Hour, wantMax: time.Hour},
		{name: "negative counts as zero", values: []time.Duration{-ms}, q: 0.5, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram(10*time.Microsecond, time.Minute)
			for _, v := range tt.values {
				h.Record(v)
			}
			if got := h.Count(); got != uint64(len(tt.values)) {
				t.Errorf("Count() = %d, want %d", got, len(tt.values))
			}
			got := h.Quantile(tt.q)
			if got < tt.want-tt.within || got > tt.want+tt.within {
				t.Errorf("Quantile(%v) = %v, want %v ± %v", tt.q, got, tt.want, tt.within)
			}
			if got := h.Max(); got != tt.wantMax {
				t.Errorf("Max() = %v, want %v", got, tt.wantMax)
			}
		})
	}
}

func micros(from, to int) []time.Duration {
	var out []time.Duration
	for i := from; i <= to; i++ {
		out = append(out, time.Duration(i)*time.Microsecond)
	}
	return out
}

func TestHistogramMergeAndConcurrentRecord(t *testing.T) {
	a := NewHistogram(10*time.Microsecond, time.Minute)
	b := NewHistogram(10*time.Microsecond, time.Minute)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				h := a
				if g%2 == 1 {
					h = b
				}
				h.Record(time.Duration(i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	a.Merge(b)
	if got := a.Count(); got != 4000 {
		t.Errorf("Count() after Merge = %d, want 4000", got)
	}
	if got := a.Max(); got != 999*time.Microsecond {
		t.Errorf("Max() after Merge = %v, want 999µs", got)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram(10*time.Microsecond, time.Minute)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i%3000) * time.Microsecond)
	}
}
