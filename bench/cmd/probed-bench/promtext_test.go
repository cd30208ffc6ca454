package main

import (
	"math"
	"strings"
	"testing"
)

const promExample = `# HELP prober_probe_total Probes run.
# TYPE prober_probe_total counter
prober_probe_total{probe_type="Readiness",result="successful"} 90
prober_probe_total{probe_type="Readiness",result="failed"} 10
prober_probe_total{probe_type="Liveness",result="successful"} 5 1700000000000
# TYPE probed_scheduler_lateness_seconds histogram
probed_scheduler_lateness_seconds_bucket{le="0.0005"} 50
probed_scheduler_lateness_seconds_bucket{le="0.001"} 80
probed_scheduler_lateness_seconds_bucket{le="0.0025"} 99
probed_scheduler_lateness_seconds_bucket{le="+Inf"} 100
probed_scheduler_lateness_seconds_sum 0.1
probed_scheduler_lateness_seconds_count 100
probed_targets 3
`

func TestParsePromText(t *testing.T) {
	ss, err := parsePromText(strings.NewReader(promExample))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := promSum(ss, "prober_probe_total"); !ok || got != 105 {
		t.Errorf("sum of prober_probe_total = %v, %v; want 105", got, ok)
	}
	if got, ok := promSum(ss, "probed_targets"); !ok || got != 3 {
		t.Errorf("probed_targets = %v, %v; want 3", got, ok)
	}
	if _, ok := promSum(ss, "nope"); ok {
		t.Error("found a metric that is not there")
	}
	failed := 0
	for _, smp := range ss {
		if smp.name == "prober_probe_total" && smp.labels["result"] == "failed" {
			failed += int(smp.value)
		}
	}
	if failed != 10 {
		t.Errorf("prober_probe_total{result=\"failed\"} = %d, want 10", failed)
	}
	h, err := promHistogram(ss, "probed_scheduler_lateness_seconds")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		q    float64
		want float64
	}{{0.01, 0.0005}, {0.5, 0.0005}, {0.51, 0.001}, {0.99, 0.0025}, {1, math.Inf(1)}}
	for _, tt := range tests {
		if got := h.quantile(tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := h.mean(); math.Abs(got-0.001) > 1e-12 {
		t.Errorf("mean = %v, want 0.001", got)
	}
	d := h.minus(h)
	if !math.IsNaN(d.quantile(0.5)) || !math.IsNaN(d.mean()) {
		t.Errorf("an empty difference has quantile %v and mean %v, want NaN", d.quantile(0.5), d.mean())
	}
	// Two processes' histograms together: twice the counts, the same
	// quantiles; added to nothing, a histogram is itself.
	two := promHist{}.plus(h).plus(h)
	if two.count != 2*h.count || two.counts[0] != 2*h.counts[0] || two.quantile(0.99) != h.quantile(0.99) || two.mean() != h.mean() {
		t.Errorf("h plus h = %+v, want twice %+v", two, h)
	}
}

func TestParsePromTextErrors(t *testing.T) {
	for _, in := range []string{"novalue\n", "x{a=\"b\" 1\n", "x not-a-number\n"} {
		if _, err := parsePromText(strings.NewReader(in)); err == nil {
			t.Errorf("parsePromText(%q): no error", in)
		}
	}
}

func TestPromLabelWithCommaInValue(t *testing.T) {
	ss, err := parsePromText(strings.NewReader("x{a=\"x,y\",b=\"0.5\"} 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].labels["a"] != "x,y" || ss[0].labels["b"] != "0.5" {
		t.Errorf("labels = %v, want a=x,y b=0.5", ss)
	}
}
