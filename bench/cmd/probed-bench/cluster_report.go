package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// clusterReport is the result of one run of the cluster benchmark.
type clusterReport struct {
	Started     string     `json:"started"`
	Finished    string     `json:"finished"`
	GOMAXPROCS  int        `json:"gomaxprocs"`
	CPUs        int        `json:"cpus"`
	LoadAverage [2]float64 `json:"load_average"` // 1-minute, at the start and at the end

	Registrations []registrationResult `json:"registrations,omitempty"`
	Transitions   []transitionResult   `json:"transitions,omitempty"`
	Watch         []watchDelayResult   `json:"watch,omitempty"`
	Probes        []probeRateResult    `json:"probes,omitempty"`
	Failover      []failoverResult     `json:"failover,omitempty"`
}

// registrationResult: CreateTarget calls, workers at a time, spread
// evenly over the setup's processes.
type registrationResult struct {
	Setup     string  `json:"setup"`
	Targets   int     `json:"targets"`
	Workers   int     `json:"workers"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

// transitionResult: flapping targets, every probe a transition.
type transitionResult struct {
	Setup                string  `json:"setup"`
	Targets              int     `json:"targets"`
	PeriodMs             float64 `json:"period_ms"`
	OfferedPerSecond     float64 `json:"offered_per_second"` // targets / period: one transition per probe if every probe runs
	Transitions          int64   `json:"transitions"`        // received by the Watch client over the window
	TransitionsPerSecond float64 `json:"transitions_per_second"`
	ProbesPerSecond      float64 `json:"probes_per_second"`
	CommitsPerSecond     float64 `json:"commits_per_second"` // store transactions, all processes
	ChangesPerCommit     float64 `json:"changes_per_commit"`
	// RSSGrowthMiB is each process's RSS at the end of the window less
	// at its start: changes the store has not taken yet wait in memory.
	RSSGrowthMiB []float64 `json:"rss_growth_mib"`
	ProcessCores []float64 `json:"process_cores"` // CPU of each probed, in cores
	EtcdCores    float64   `json:"etcd_cores"`
	BenchCores   float64   `json:"bench_cores"` // the benchmark: targets and the Watch client
	// Lateness of the probes' timers over the window, every process's.
	Lateness lateness `json:"lateness"`
	// LatenessHalvesP99Ms is the p99 of the first and of the second half
	// of the window: lateness that grows shows as a second one above.
	LatenessHalvesP99Ms [2]float64 `json:"lateness_halves_p99_ms"`
}

// lateness summarizes the timer wheel's lateness histogram over a window.
type lateness struct {
	Fires  float64 `json:"fires"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"` // upper bound of the bucket
	P99Ms  float64 `json:"p99_ms"` // upper bound of the bucket
}

// watchDelayResult: the delay of transitions at Watch clients on one
// path. FlipMs runs from the backend's flip (includes waiting for the
// next probe, up to one period); DetectMs from the first probe that saw
// the flip.
type watchDelayResult struct {
	Setup    string  `json:"setup"`
	Path     string  `json:"path"`
	PeriodMs float64 `json:"period_ms"`
	Flips    int     `json:"flips"`  // flips timed
	Missed   int     `json:"missed"` // flips with no event (or no probe) seen
	FlipMs   latency `json:"flip_ms"`
	DetectMs latency `json:"detect_ms"`
}

// probeRateResult: steady targets (no writes), probes/s and CPU.
type probeRateResult struct {
	Setup             string        `json:"setup"`
	Replicas          int           `json:"replicas"`
	Targets           int           `json:"targets"`
	PeriodMs          float64       `json:"period_ms"`
	ExpectedPerSecond float64       `json:"expected_per_second"`
	ProbesPerSecond   float64       `json:"probes_per_second"`
	Processes         []processRate `json:"processes"`
	EtcdCores         float64       `json:"etcd_cores"`
	BenchCores        float64       `json:"bench_cores"`
	Lateness          lateness      `json:"lateness"` // the probes' timers over the window, every process's
}

// processRate is one probed process of a probeRateResult.
type processRate struct {
	Replica         string  `json:"replica,omitempty"`
	Targets         int     `json:"targets"` // owned at the start of the window
	ProbesPerSecond float64 `json:"probes_per_second"`
	CPUUsPerProbe   float64 `json:"cpu_us_per_probe"`
	Cores           float64 `json:"cores"`
	Failed          int64   `json:"failed"`
}

// failoverResult: kill → next probe of each target of the killed replica.
type failoverResult struct {
	LeaseTTLSeconds float64        `json:"lease_ttl_seconds"`
	PeriodMs        float64        `json:"period_ms"`
	Kills           int            `json:"kills"`
	Targets         int            `json:"targets"`    // owned by the killed replicas, over every kill
	NotProbed       int            `json:"not_probed"` // of them, not probed again within 3 × TTL + 10 s
	Ms              latency        `json:"ms"`
	MinMs           float64        `json:"min_ms"`
	PerKill         []failoverKill `json:"per_kill"`
}

type failoverKill struct {
	Replica string  `json:"replica"`
	Targets int     `json:"targets"`
	Ms      latency `json:"ms"`
}

// printClusterReport prints the tables of the measurements that ran.
func printClusterReport(w io.Writer, cfg clusterConfig, r clusterReport) error {
	fmt.Fprintf(w, "cluster: %s – %s, %d CPUs, GOMAXPROCS %d, load average %.1f → %.1f\n",
		r.Started, r.Finished, r.CPUs, r.GOMAXPROCS, r.LoadAverage[0], r.LoadAverage[1])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	table := func(title, header string) {
		fmt.Fprintf(tw, "\n%s\n", title)
		fmt.Fprintln(tw, header)
	}
	if len(r.Registrations) > 0 {
		table(fmt.Sprintf("registrations (%d workers spread over the processes)", cfg.workers), "setup\ttargets\tseconds\tregistrations/s\t")
		for _, x := range r.Registrations {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", x.Setup, x.Targets, f(x.Seconds, 2), f(x.PerSecond, 0))
		}
	}
	if len(r.Transitions) > 0 {
		table("transitions (flapping targets: every probe a transition; counted at one Watch client)",
			"setup\ttargets × period\toffered/s\ttransitions/s\tprobes/s\tcommits/s\tchanges/commit\tRSS growth MiB\tprobed cores\tetcd cores\tbench cores\tlateness mean ms\tp50\tp99\tp99 1st / 2nd half\t")
		for _, x := range r.Transitions {
			fmt.Fprintf(tw, "%s\t%d × %sms\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Setup, x.Targets, f(x.PeriodMs, 0), f(x.OfferedPerSecond, 0),
				f(x.TransitionsPerSecond, 0), f(x.ProbesPerSecond, 0), f(x.CommitsPerSecond, 0), f(x.ChangesPerCommit, 1), joinFloats(x.RSSGrowthMiB, 0),
				joinFloats(x.ProcessCores, 2), f(x.EtcdCores, 2), f(x.BenchCores, 2),
				f(x.Lateness.MeanMs, 2), f(x.Lateness.P50Ms, 1), f(x.Lateness.P99Ms, 1), joinFloats(x.LatenessHalvesP99Ms[:], 1))
		}
	}
	if len(r.Watch) > 0 {
		table("Watch delay (ms): flip = backend flips → event at the client; detect = first probe seeing it → event",
			"setup\tpath\tflips\tmissed\tflip p50\tflip p99\tdetect p50\tdetect p90\tdetect p99\tdetect max\t")
		for _, x := range r.Watch {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Setup, x.Path, x.Flips, x.Missed, f(x.FlipMs.P50, 1), f(x.FlipMs.P99, 1),
				f(x.DetectMs.P50, 2), f(x.DetectMs.P90, 2), f(x.DetectMs.P99, 2), f(x.DetectMs.Max, 2))
		}
	}
	if len(r.Probes) > 0 {
		table("probes/s (steady targets, no store writes)",
			"setup\ttargets × period\texpected/s\tprobes/s\tper process: probes/s\tCPU µs/probe\tcores\tetcd cores\tbench cores\tlateness mean ms\tp50\tp99\t")
		for _, x := range r.Probes {
			var rate, us, c []float64
			for _, p := range x.Processes {
				rate, us, c = append(rate, p.ProbesPerSecond), append(us, p.CPUUsPerProbe), append(c, p.Cores)
			}
			fmt.Fprintf(tw, "%s\t%d × %sms\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Setup, x.Targets, f(x.PeriodMs, 0), f(x.ExpectedPerSecond, 0),
				f(x.ProbesPerSecond, 0), joinFloats(rate, 0), joinFloats(us, 1), joinFloats(c, 2), f(x.EtcdCores, 2), f(x.BenchCores, 2),
				f(x.Lateness.MeanMs, 2), f(x.Lateness.P50Ms, 1), f(x.Lateness.P99Ms, 1))
		}
	}
	if len(r.Failover) > 0 {
		table("failover (ms): SIGKILL of one of 3 replicas → next probe of each of its targets",
			"lease TTL\tperiod\tkills\ttargets\tnot probed\tmin\tp50\tp90\tp99\tmax\t")
		for _, x := range r.Failover {
			fmt.Fprintf(tw, "%ss\t%sms\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", f(x.LeaseTTLSeconds, 0), f(x.PeriodMs, 0), x.Kills, x.Targets, x.NotProbed,
				f(x.MinMs, 0), f(x.Ms.P50, 0), f(x.Ms.P90, 0), f(x.Ms.P99, 0), f(x.Ms.Max, 0))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// joinFloats formats xs with prec decimals, separated by " / ".
func joinFloats(xs []float64, prec int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f(x, prec)
	}
	return strings.Join(s, " / ")
}
