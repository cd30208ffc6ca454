package clustersoak

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is what a soak measured and every invariant that did not hold.
type Report struct {
	Seed   uint64
	Config Config
	Faults int
	Took   time.Duration

	// Failover: targets whose prober was killed or stopped, the time to
	// their first probe by another replica.
	FailoverTargets                       int
	FailoverP50, FailoverP99, FailoverMax time.Duration
	LongestGap                            time.Duration // any target, any time
	DoubleWindows                         int           // two replicas probing one target
	LongestDouble                         time.Duration
	Flips, Events                         int      // backend flips; events in etcd's log
	Streams                               []string // Watch streams per replica's watcher
	Creates, Deletes, Uncertain           int      // churn calls
	WritesLost                            int
	Usage                                 []string
	ForeignWritten, ForeignSeen           int
	LeaderPauseLeaseLosses                int

	// Violations by invariant.
	Violations map[string][]string
}

func (r *Report) violate(invariant, what string) {
	if r.Violations == nil {
		r.Violations = map[string][]string{}
	}
	r.Violations[invariant] = append(r.Violations[invariant], what)
}

// Write prints the report.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "cluster soak: seed %d (PROBED_SOAK_SEED=%d reproduces the schedule); %d replicas, 3 etcd members, %d targets every %v, lease TTL %v; %d faults; took %v\n",
		r.Seed, r.Seed, c.Replicas, c.Targets, c.Period, c.LeaseTTL, r.Faults, r.Took.Round(time.Second))
	fmt.Fprintf(w, "  failover (%d targets of a killed or stopped replica): p50 %v, p99 %v, max %v; longest any target went unprobed %v (bound 2 × TTL + period + slack = %v)\n",
		r.FailoverTargets, ms(r.FailoverP50), ms(r.FailoverP99), ms(r.FailoverMax), ms(r.LongestGap), c.bound())
	fmt.Fprintf(w, "  double-probe windows: %d, longest %v (bound: one period, %v)\n", r.DoubleWindows, ms(r.LongestDouble), c.Period)
	fmt.Fprintf(w, "  flips: %d, each a readiness transition on every replica's Watch; %d events in etcd's log; streams per watcher: %s\n", r.Flips, r.Events, strings.Join(r.Streams, ", "))
	fmt.Fprintf(w, "  writes: %d creates and %d deletes acknowledged, %d uncertain (failed or timed out); lost: %d\n", r.Creates, r.Deletes, r.Uncertain, r.WritesLost)
	fmt.Fprintf(w, "  usage: %s\n", strings.Join(r.Usage, "; "))
	fmt.Fprintf(w, "  foreign watcher: %d puts acknowledged, %d delivered; leases lost in etcd leader pauses: %d\n", r.ForeignWritten, r.ForeignSeen, r.LeaderPauseLeaseLosses)
	var states []string
	for _, n := range invariants {
		state := "held"
		if len(r.Violations[n]) > 0 {
			state = fmt.Sprintf("VIOLATED ×%d", len(r.Violations[n]))
		}
		states = append(states, n+" "+state)
	}
	fmt.Fprintf(w, "  invariants: %s\n", strings.Join(states, ", "))
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "  every invariant held")
		return
	}
	names := make([]string, 0, len(r.Violations))
	for n := range r.Violations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vs := r.Violations[n]
		fmt.Fprintf(w, "  VIOLATED %s (%d):\n", n, len(vs))
		for _, v := range vs[:min(len(vs), 10)] {
			fmt.Fprintf(w, "    %s\n", v)
		}
	}
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
