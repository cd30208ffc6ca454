package clustersoak

import (
	"testing"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

var t0 = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// series is a probe every period ms from start to end by slot.
func series(slot, start, end, period int) []probe {
	var out []probe
	for ms := start; ms <= end; ms += period {
		out = append(out, probe{at: at(ms), slot: slot})
	}
	return out
}

func merge(ps ...[]probe) []probe {
	var out []probe
	for _, p := range ps {
		out = append(out, p...)
	}
	for i := 1; i < len(out); i++ { // insertion sort: small
		for j := i; j > 0 && out[j].at.Before(out[j-1].at); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestDoubleWindows(t *testing.T) {
	const period = 1000
	split := 2 * period * time.Millisecond
	tests := []struct {
		name    string
		probes  []probe
		windows int
		longest time.Duration
	}{
		{"one replica", series(1, 0, 10000, period), 0, 0},
		{"a handover", merge(series(1, 0, 5000, period), series(2, 5400, 10000, period)), 0, 0},
		{"a failover after a gap", merge(series(1, 0, 3000, period), series(2, 7000, 10000, period)), 0, 0},
		{"a stray probe after a pause", merge(series(1, 0, 3000, period), series(2, 6000, 12000, period), []probe{{at: at(7500), slot: 1}}), 1, 0},
		{"two probers for three seconds", merge(series(1, 0, 10000, period), series(2, 4500, 7500, period)), 1, 3000 * time.Millisecond},
		{"the old owner back after the new one started", merge(series(1, 0, 5000, period), series(2, 4800, 10000, period)), 1, 200 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := doubleWindows(tc.probes, split)
			var longest time.Duration
			for _, w := range ws {
				longest = max(longest, w.length())
			}
			if len(ws) != tc.windows || longest != tc.longest {
				t.Errorf("%d windows, longest %v; want %d, %v", len(ws), longest, tc.windows, tc.longest)
			}
		})
	}
}

func TestLongestGap(t *testing.T) {
	tests := []struct {
		name     string
		probes   []probe
		from, to int
		want     time.Duration
	}{
		{"steady", series(1, 0, 10000, 1000), 0, 10000, time.Second},
		{"a failover", merge(series(1, 0, 3000, 1000), series(2, 7500, 10000, 1000)), 0, 10000, 4500 * time.Millisecond},
		{"none in the window", nil, 0, 5000, 5 * time.Second},
		{"the window's end", series(1, 0, 3000, 1000), 0, 10000, 7 * time.Second},
		{"probes outside the window ignored", series(1, 0, 20000, 5000), 1000, 9000, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if g := longestGap(tc.probes, at(tc.from), at(tc.to)); g.length != tc.want {
				t.Errorf("longest gap %v, want %v", g.length, tc.want)
			}
		})
	}
}

func TestFailoverTime(t *testing.T) {
	probes := merge(series(3, 0, 4000, 1000), series(1, 6300, 9000, 1000))
	fault := at(4100)
	if slot, ok := proberAt(probes, fault); !ok || slot != 3 {
		t.Fatalf("prober at the fault: %d, %v; want 3", slot, ok)
	}
	if d, ok := failoverTime(probes, 3, fault); !ok || d != 2200*time.Millisecond {
		t.Errorf("failover %v, %v; want 2.2s", d, ok)
	}
	if _, ok := failoverTime(series(3, 0, 9000, 1000), 3, fault); ok {
		t.Error("a failover found where only the victim probed")
	}
	if _, ok := proberAt(probes, at(-1)); ok {
		t.Error("a prober before the first probe")
	}
}

func TestReadinessFlips(t *testing.T) {
	tr := func(rev uint64, name string, from, to probev1.Result) event {
		return event{rev: rev, name: name, kind: probev1.EventKind_EVENT_KIND_TRANSITION, probe: probev1.ProbeType_PROBE_TYPE_READINESS, from: from, to: to}
	}
	const (
		s = probev1.Result_RESULT_SUCCESS
		f = probev1.Result_RESULT_FAILURE
	)
	events := []event{
		tr(1, "a", f, s), // the first probe: before the flips
		tr(5, "a", s, f),
		tr(6, "b", f, s),
		tr(7, "a", f, s),
		{rev: 8, name: "a", kind: probev1.EventKind_EVENT_KIND_UPDATED},
		tr(9, "b", f, s), // b's transition to failure is missing
	}
	counts, problems := readinessFlips(events, 2)
	if counts["a"] != 2 || counts["b"] != 2 {
		t.Errorf("counts %v, want a:2 b:2", counts)
	}
	if len(problems) != 1 {
		t.Errorf("problems %q, want the one of b at revision 9", problems)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(ds, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 99) != 0 {
		t.Error("p99 of nothing is not 0")
	}
}

func TestFlatness(t *testing.T) {
	f := flatness{rssFactor: 1.5, rssSlack: 10 << 20, goFactor: 1.3, goSlack: 10, minLife: 30 * time.Second, warmup: 10 * time.Second, sampleSpan: 2}
	samples := func(rss0, rss1 int64, g0, g1 int, life int) []usage {
		var out []usage
		for s := 0; s <= life; s += 2 {
			frac := float64(s) / float64(life)
			out = append(out, usage{at: t0.Add(time.Duration(s) * time.Second), rss: rss0 + int64(frac*float64(rss1-rss0)), goroutines: g0 + int(frac*float64(g1-g0))})
		}
		return out
	}
	tests := []struct {
		name    string
		samples []usage
		judged  bool
		problem bool
	}{
		{"flat", samples(40<<20, 42<<20, 80, 90, 60), true, false},
		{"too short a life", samples(40<<20, 400<<20, 80, 90, 20), false, false},
		{"RSS grows", samples(40<<20, 100<<20, 80, 90, 60), true, true},
		{"goroutines grow", samples(40<<20, 40<<20, 80, 300, 60), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ok, problem := f.judge(t0, tc.samples)
			if ok != tc.judged || (problem != "") != tc.problem {
				t.Errorf("judged %v, problem %q; want judged %v, a problem %v", ok, problem, tc.judged, tc.problem)
			}
		})
	}
}
