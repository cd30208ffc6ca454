package clustersoak

import (
	"fmt"
	"slices"
	"sort"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The invariants the soak checks, by the names its report uses.
const (
	InvFailover  = "failover"       // every target probed again within 2 × TTL + one period (+ slack)
	InvDouble    = "double-probe"   // no two replicas probing a target beyond one period
	InvWatch     = "watch"          // every replica's Watch: etcd's events, identical, in order, across resumes
	InvFlips     = "flips"          // every flip a readiness transition on every replica's Watch
	InvReadiness = "readiness"      // final readiness equal to the truth on every replica
	InvWrites    = "writes"         // no acknowledged create or delete lost
	InvUsage     = "usage"          // RSS and goroutines of the replicas flat
	InvForeign   = "foreign-watch"  // the foreign etcd watcher never broken
	InvRecovery  = "recovery"       // the cluster rebalances after each fault
	InvStray     = "probe-identity" // every probe names the replica that sent it
)

// invariants are every invariant, in the order the report prints them.
var invariants = []string{InvFailover, InvDouble, InvWatch, InvFlips, InvReadiness, InvWrites, InvUsage, InvForeign, InvStray}

// gap is the longest time a target went without a probe in a window.
type gap struct {
	length     time.Duration
	start, end time.Time
}

// longestGap is the longest interval in [from, to] without a probe in
// probes (sorted by time), the window's ends included.
func longestGap(probes []probe, from, to time.Time) gap {
	var g gap
	prev := from
	consider := func(at time.Time) {
		if d := at.Sub(prev); d > g.length {
			g = gap{length: d, start: prev, end: at}
		}
		prev = at
	}
	for _, p := range probes {
		if p.at.Before(from) || p.at.After(to) {
			continue
		}
		consider(p.at)
	}
	consider(to)
	return g
}

// window is a time two replicas both probed a target: the overlap of
// their runs of probes.
type window struct {
	slots      [2]int
	start, end time.Time
}

func (w window) length() time.Duration { return w.end.Sub(w.start) }

// run is a series of probes of one target by one replica, each within
// split of the one before.
type run struct {
	slot       int
	start, end time.Time
}

// doubleWindows returns the windows in which two replicas probed the
// target in turn. A replica's probes form runs, a pause of more than
// split (two periods) ending one; two runs of different replicas that
// overlap are a window (a single late probe inside another replica's
// run is a window of length 0).
func doubleWindows(probes []probe, split time.Duration) []window {
	var runs []run
	open := map[int]int{} // slot → index of its current run
	for _, p := range probes {
		if i, ok := open[p.slot]; ok && p.at.Sub(runs[i].end) <= split {
			runs[i].end = p.at
			continue
		}
		open[p.slot] = len(runs)
		runs = append(runs, run{slot: p.slot, start: p.at, end: p.at})
	}
	var out []window
	for i := range runs {
		for j := i + 1; j < len(runs); j++ {
			a, b := runs[i], runs[j]
			if a.slot == b.slot {
				continue
			}
			start, end := maxTime(a.start, b.start), minTime(a.end, b.end)
			if !end.Before(start) {
				out = append(out, window{slots: [2]int{a.slot, b.slot}, start: start, end: end})
			}
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// failoverTime is, for a target whose last probe before a fault at at
// was by slot, the time from at to its first probe by another replica;
// false when it had none.
func failoverTime(probes []probe, slot int, at time.Time) (time.Duration, bool) {
	for _, p := range probes {
		if p.at.After(at) && p.slot != slot {
			return p.at.Sub(at), true
		}
	}
	return 0, false
}

// proberAt is the slot that probed last before at.
func proberAt(probes []probe, at time.Time) (int, bool) {
	i := sort.Search(len(probes), func(i int) bool { return !probes[i].at.Before(at) })
	if i == 0 {
		return 0, false
	}
	return probes[i-1].slot, true
}

// readinessFlips counts each target's readiness transitions between
// success and failure in events after revision after, and says whether
// each transition starts where the one before ended.
func readinessFlips(events []event, after uint64) (map[string]int, []string) {
	counts := map[string]int{}
	last := map[string]probev1.Result{}
	var problems []string
	for _, e := range events {
		if e.kind != probev1.EventKind_EVENT_KIND_TRANSITION || e.probe != probev1.ProbeType_PROBE_TYPE_READINESS {
			continue
		}
		if prev, ok := last[e.name]; ok && prev != e.from {
			problems = append(problems, fmt.Sprintf("%s: a transition %v→%v at revision %d follows one to %v", e.name, e.from, e.to, e.rev, prev))
		}
		last[e.name] = e.to
		if e.rev > after && known(e.from) && known(e.to) && e.from != e.to {
			counts[e.name]++
		}
	}
	return counts, problems
}

func known(r probev1.Result) bool {
	return r == probev1.Result_RESULT_SUCCESS || r == probev1.Result_RESULT_FAILURE
}

// firstDifference is the first index where a and b differ, -1 if none.
func firstDifference[T comparable](a, b []T) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// percentile is the p-th percentile (0–100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// flatness bounds the growth of a replica's RSS and goroutines from its
// baseline to its end, for a process that lived long enough to judge.
type flatness struct {
	rssFactor  float64
	rssSlack   int64
	goFactor   float64
	goSlack    int
	minLife    time.Duration // processes that lived less are not judged
	warmup     time.Duration // samples this early in a life are not a baseline
	sampleSpan int           // samples averaged at each end
}

var defaultFlatness = flatness{rssFactor: 1.5, rssSlack: 32 << 20, goFactor: 1.3, goSlack: 50, minLife: 30 * time.Second, warmup: 10 * time.Second, sampleSpan: 3}

// judge compares the first samples after the warm-up with the last
// ones; ok is false when the process did not live long enough.
func (f flatness) judge(started time.Time, samples []usage) (base, end usage, ok bool, problem string) {
	var s []usage
	for _, u := range samples {
		if u.at.Sub(started) >= f.warmup {
			s = append(s, u)
		}
	}
	if len(s) < 2*f.sampleSpan || s[len(s)-1].at.Sub(started) < f.minLife {
		return usage{}, usage{}, false, ""
	}
	base, end = mean(s[:f.sampleSpan]), mean(s[len(s)-f.sampleSpan:])
	if float64(end.rss) > float64(base.rss)*f.rssFactor+float64(f.rssSlack) {
		problem = fmt.Sprintf("RSS %d MiB → %d MiB", base.rss>>20, end.rss>>20)
	}
	if float64(end.goroutines) > float64(base.goroutines)*f.goFactor+float64(f.goSlack) {
		if problem != "" {
			problem += ", "
		}
		problem += fmt.Sprintf("goroutines %d → %d", base.goroutines, end.goroutines)
	}
	return base, end, true, problem
}

func mean(us []usage) usage {
	var m usage
	for _, u := range us {
		m.rss += u.rss
		m.goroutines += u.goroutines
	}
	m.rss /= int64(len(us))
	m.goroutines /= len(us)
	m.at = us[len(us)-1].at
	return m
}
