package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
)

// promSample is one sample of a Prometheus text exposition.
type promSample struct {
	name   string
	labels map[string]string // nil when none
	value  float64
}

// parsePromText reads the samples of a Prometheus text exposition with
// Prometheus' own parser (expfmt), a histogram as its _bucket (with an
// "le" label), _sum and _count samples, a summary as its _sum and _count.
func parsePromText(r io.Reader) ([]promSample, error) {
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	var out []promSample
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(suffix string, v float64, extra ...string) {
				ls := labels
				if len(extra) == 2 {
					ls = maps.Clone(labels)
					ls[extra[0]] = extra[1]
				}
				out = append(out, promSample{name: name + suffix, labels: ls, value: v})
			}
			switch {
			case m.Counter != nil:
				add("", m.GetCounter().GetValue())
			case m.Gauge != nil:
				add("", m.GetGauge().GetValue())
			case m.Untyped != nil:
				add("", m.GetUntyped().GetValue())
			case m.Histogram != nil:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					add("_bucket", float64(b.GetCumulativeCount()), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				if !inf { // implied: every observation
					add("_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				}
				add("_sum", h.GetSampleSum())
				add("_count", float64(h.GetSampleCount()))
			case m.Summary != nil:
				add("_sum", m.GetSummary().GetSampleSum())
				add("_count", float64(m.GetSummary().GetSampleCount()))
			}
		}
	}
	return out, nil
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
			le := s.labels["le"]
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

// plus returns the observations of h and o together (same buckets; an
// empty h takes o's).
func (h promHist) plus(o promHist) promHist {
	if len(h.bounds) == 0 {
		return promHist{bounds: o.bounds, counts: slices.Clone(o.counts), sum: o.sum, count: o.count}
	}
	d := promHist{bounds: h.bounds, counts: slices.Clone(h.counts), sum: h.sum + o.sum, count: h.count + o.count}
	if slices.Equal(h.bounds, o.bounds) {
		for i := range d.counts {
			d.counts[i] += o.counts[i]
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
