package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"
	"time"
)

// schedConfig is the workload of the sched benchmark, shared by the parent
// and its children.
type schedConfig struct {
	probes   int
	period   time.Duration
	duration time.Duration // measured window
	warmup   time.Duration // before the window
	tick     time.Duration // wheel only
	shards   int           // wheel only; 0 for the wheel's default
	// metrics (wheel only) wires probed's scheduler metrics
	// (sched_metrics.go); the parent then runs the wheel without and with.
	metrics bool
}

// register defines the workload flags on fs.
func (c *schedConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&c.probes, "probes", 100_000, "number of probes")
	fs.DurationVar(&c.period, "period", 100*time.Millisecond, "probe period")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "warm-up before the measured window")
	fs.DurationVar(&c.tick, "tick", time.Millisecond, "timer wheel tick")
	fs.IntVar(&c.shards, "shards", 0, "timer wheel shards (0: the wheel's default, GOMAXPROCS)")
	fs.BoolVar(&c.metrics, "metrics", false, "also run the wheel with probed's scheduler metrics (Prometheus exporter, scraped every second) and report their CPU overhead")
}

// validate checks the flags.
func (c *schedConfig) validate() error {
	switch {
	case c.probes < 1:
		return fmt.Errorf("--probes must be positive, got %d", c.probes)
	case c.period <= 0, c.duration <= 0, c.tick <= 0:
		return fmt.Errorf("--period, --duration and --tick must be positive")
	case c.warmup < 0, c.shards < 0:
		return fmt.Errorf("--warmup and --shards must not be negative")
	}
	return nil
}

// args returns the flags that reproduce c, for a child.
func (c *schedConfig) args() []string {
	return []string{
		fmt.Sprintf("--probes=%d", c.probes),
		fmt.Sprintf("--period=%v", c.period),
		fmt.Sprintf("--duration=%v", c.duration),
		fmt.Sprintf("--warmup=%v", c.warmup),
		fmt.Sprintf("--tick=%v", c.tick),
		fmt.Sprintf("--shards=%d", c.shards),
	}
}

// schedReport is the result of the sched benchmark, printed as JSON with
// --json.
type schedReport struct {
	Probes   int         `json:"probes"`
	PeriodMs float64     `json:"period_ms"`
	Wheel    modelResult `json:"wheel"`
	Baseline modelResult `json:"baseline"`
	Ratio    schedRatio  `json:"ratio"`
	// WakeFloor is one goroutine that sleeps to every tick boundary and
	// does nothing (the "timers" model with one probe and the tick as
	// period): what the wheel's driver pays to wake up at all.
	// WakeFloorNsPerFire spreads its CPU over the wheel's fires (its CPU
	// per second / the wheel's fires per second): the part of the wheel's
	// CPU per fire that no scheduler work can save.
	WakeFloor          modelResult `json:"wake_floor"`
	WakeFloorNsPerFire float64     `json:"wake_floor_ns_per_fire"`
	// With --metrics: the wheel with probed's scheduler metrics, and the
	// extra CPU per fire they cost, in percent.
	WheelMetrics       *modelResult `json:"wheel_metrics,omitempty"`
	MetricsOverheadPct *float64     `json:"metrics_overhead_pct,omitempty"`
}

// schedRatio compares the baseline to the wheel: how many times more the
// baseline uses.
type schedRatio struct {
	CPUPerFire float64 `json:"cpu_per_fire"`
	RSS        float64 `json:"rss"`
}

// newSchedReport assembles the report of one run.
func newSchedReport(cfg schedConfig, wheel, baseline, floor modelResult) schedReport {
	return schedReport{
		Probes:   cfg.probes,
		PeriodMs: ms(cfg.period),
		Wheel:    wheel,
		Baseline: baseline,
		Ratio: schedRatio{
			CPUPerFire: ratio(baseline.CPUNsPerFire, wheel.CPUNsPerFire),
			RSS:        ratio(float64(baseline.RSSBytes), float64(wheel.RSSBytes)),
		},
		WakeFloor:          floor,
		WakeFloorNsPerFire: 1e9 * ratio(ratio(floor.CPUSeconds, floor.WindowSeconds), ratio(float64(wheel.FiresDelivered), wheel.WindowSeconds)),
	}
}

// wakeFloorArgs are the child arguments of the wake-up floor of cfg's
// wheel: one goroutine waking at every tick.
func wakeFloorArgs(cfg schedConfig) []string {
	floor := cfg
	floor.probes, floor.period = 1, cfg.tick
	return append([]string{schedChildCommand, "--model=timers"}, floor.args()...)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// runSched is the sched subcommand: it runs each model in a child process,
// one after the other, and prints a table (and with --json, one JSON object
// on the last line).
func runSched(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("sched", stderr, "also print the result as one JSON object on the last line",
		"Runs the timer wheel and the kubelet model (one goroutine + one time.Ticker per",
		"probe), each in its own child process, over the same no-op probe.")
	var cfg schedConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}

	results := make(map[string]modelResult, len(modelNames))
	for _, name := range modelNames {
		fmt.Fprintf(stderr, "sched: running %s: %d probes every %v, %v warm-up + %v measured\n",
			name, cfg.probes, cfg.period, cfg.warmup, cfg.duration)
		var res modelResult
		childArgs := append([]string{schedChildCommand, "--model=" + name}, cfg.args()...)
		if err := runChild(ctx, stderr, &res, childArgs...); err != nil {
			return err
		}
		results[name] = res
		if name == "wheel" && cfg.metrics {
			fmt.Fprintf(stderr, "sched: running wheel with metrics\n")
			var res modelResult
			if err := runChild(ctx, stderr, &res, append(childArgs, "--metrics")...); err != nil {
				return err
			}
			results["wheel+metrics"] = res
		}
	}
	fmt.Fprintf(stderr, "sched: running the wake-up floor: one goroutine waking every %v, %v warm-up + %v measured\n", cfg.tick, cfg.warmup, cfg.duration)
	var floor modelResult
	if err := runChild(ctx, stderr, &floor, wakeFloorArgs(cfg)...); err != nil {
		return err
	}
	report := newSchedReport(cfg, results["wheel"], results["baseline"], floor)
	if m, ok := results["wheel+metrics"]; ok {
		overhead := metricsOverhead(report.Wheel, m)
		report.WheelMetrics, report.MetricsOverheadPct = &m, &overhead
	}
	if err := printSchedTable(stdout, cfg, report); err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLine(stdout, report)
	}
	return nil
}

// printSchedTable prints the report side by side.
func printSchedTable(w io.Writer, cfg schedConfig, r schedReport) error {
	fmt.Fprintf(w, "sched: %d probes every %v, %v measured after %v warm-up, wheel tick %v, GOMAXPROCS %d\n\n",
		cfg.probes, cfg.period, cfg.duration, cfg.warmup, cfg.tick, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	wh, bl := r.Wheel, r.Baseline
	rows := []struct {
		name       string
		wheel, bas string
		ratio      string
	}{
		{"fires expected", d(wh.FiresExpected), d(bl.FiresExpected), ""},
		{"fires delivered", d(wh.FiresDelivered), d(bl.FiresDelivered), ""},
		{"delivered %", f(100*wh.deliveredRatio(), 3), f(100*bl.deliveredRatio(), 3), ""},
		{"cpu seconds", f(wh.CPUSeconds, 3), f(bl.CPUSeconds, 3), ""},
		{"cpu ns per fire", f(wh.CPUNsPerFire, 1), f(bl.CPUNsPerFire, 1), f(r.Ratio.CPUPerFire, 1) + "x"},
		{"peak rss MiB", f(mib(wh.RSSBytes), 1), f(mib(bl.RSSBytes), 1), f(r.Ratio.RSS, 1) + "x"},
		{"state bytes per probe", f(wh.StateBytesPerProbe, 1), f(bl.StateBytesPerProbe, 1), ""},
		{"goroutines (peak)", d(int64(wh.Goroutines)), d(int64(bl.Goroutines)), ""},
		{"lateness p50 ms", f(wh.LatenessMs.P50, 3), f(bl.LatenessMs.P50, 3), ""},
		{"lateness p99 ms", f(wh.LatenessMs.P99, 3), f(bl.LatenessMs.P99, 3), ""},
		{"lateness max ms", f(wh.LatenessMs.Max, 3), f(bl.LatenessMs.Max, 3), ""},
	}
	fmt.Fprintf(tw, "%-22s\twheel\tbaseline\tbaseline/wheel\t\n", "")
	for _, row := range rows { // the padded name stays left-aligned
		fmt.Fprintf(tw, "%-22s\t%s\t%s\t%s\t\n", row.name, row.wheel, row.bas, row.ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwake-up floor: one goroutine waking every %v uses %s CPU s per s = %s ns per wheel fire; the wheel's own work: %s ns per fire\n",
		cfg.tick, f(ratio(r.WakeFloor.CPUSeconds, r.WakeFloor.WindowSeconds), 4), f(r.WakeFloorNsPerFire, 1), f(wh.CPUNsPerFire-r.WakeFloorNsPerFire, 1))
	if m := r.WheelMetrics; m != nil {
		fmt.Fprintf(w, "\nwheel with metrics: cpu ns per fire %s (without %s): %+.1f%%; lateness p99 ms %s (without %s)\n",
			f(m.CPUNsPerFire, 1), f(wh.CPUNsPerFire, 1), *r.MetricsOverheadPct, f(m.LatenessMs.P99, 3), f(wh.LatenessMs.P99, 3))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func d(n int64) string             { return fmt.Sprintf("%d", n) }
func f(x float64, prec int) string { return fmt.Sprintf("%.*f", prec, x) }
func mib(b int64) float64          { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64   { return float64(d) / float64(time.Millisecond) }
