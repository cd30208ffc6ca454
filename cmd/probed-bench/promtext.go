package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// promSample is one sample of the Prometheus text exposition format.
type promSample struct {
	name   string
	labels string // as written between the braces, "" when none
	value  float64
}

// parsePromText reads the samples of a Prometheus text exposition,
// skipping comments. It is the little the benchmarks need (sums and
// histograms), not a full parser: label values must not contain '}'.
func parsePromText(r io.Reader) ([]promSample, error) {
	var out []promSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		var s promSample
		var rest string
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			j := strings.IndexByte(line[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated labels in %q", line)
			}
			s.name, s.labels, rest = line[:i], line[i+1:i+j], line[i+j+1:]
		} else if i >= 0 {
			s.name, rest = line[:i], line[i:]
		} else {
			return nil, fmt.Errorf("no value in %q", line)
		}
		f := strings.Fields(rest) // value [timestamp]
		if len(f) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q: %w", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// promSum returns the sum of every sample named name (over all label
// sets) and whether there was one.
func promSum(ss []promSample, name string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range ss {
		if s.name == name {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// promLabel returns the value of label key in labels ("" when absent).
func promLabel(labels, key string) string {
	for rest := labels; rest != ""; {
		var kv string
		// Values are quoted; a comma inside quotes is not a separator.
		i, inQuote := 0, false
		for ; i < len(rest); i++ {
			if rest[i] == '"' && (i == 0 || rest[i-1] != '\\') {
				inQuote = !inQuote
			}
			if rest[i] == ',' && !inQuote {
				break
			}
		}
		kv, rest = rest[:i], strings.TrimPrefix(rest[i:], ",")
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == key {
			if u, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
				return u
			}
		}
	}
	return ""
}

// promHist is a cumulative histogram: counts[i] observations are at most
// bounds[i]; the last bound is +Inf.
type promHist struct {
	bounds []float64
	counts []float64
	sum    float64
	count  float64
}

// promHistogram collects histogram name (its _bucket, _sum and _count
// series, summed over other labels) from ss.
func promHistogram(ss []promSample, name string) (promHist, error) {
	byBound := map[float64]float64{}
	var h promHist
	for _, s := range ss {
		switch s.name {
		case name + "_bucket":
			le := promLabel(s.labels, "le")
			b, err := strconv.ParseFloat(le, 64)
			if err != nil {
				return promHist{}, fmt.Errorf("%s: bucket bound %q: %w", name, le, err)
			}
			byBound[b] += s.value
		case name + "_sum":
			h.sum += s.value
		case name + "_count":
			h.count += s.value
		}
	}
	if len(byBound) == 0 {
		return promHist{}, fmt.Errorf("no histogram %s", name)
	}
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h, nil
}

// minus returns the observations of h made since before (same buckets).
func (h promHist) minus(before promHist) promHist {
	d := promHist{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum - before.sum, count: h.count - before.count}
	if slices.Equal(h.bounds, before.bounds) {
		for i := range d.counts {
			d.counts[i] -= before.counts[i]
		}
	}
	return d
}

// quantile returns the upper bound of the bucket holding the q-quantile
// (+Inf when it is in the last bucket, NaN without observations).
func (h promHist) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] <= 0 {
		return math.NaN()
	}
	rank := math.Max(1, math.Ceil(q*h.counts[len(h.counts)-1]))
	for i, c := range h.counts {
		if c >= rank {
			return h.bounds[i]
		}
	}
	return math.Inf(1)
}

// mean returns the mean observation (NaN without observations).
func (h promHist) mean() float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	return h.sum / h.count
}
