package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Prometheus series the e2e benchmark reads from probed.
const (
	metricProbes   = "prober_probe_total"
	metricLateness = "probed_scheduler_lateness_seconds"
	metricCommit   = "probed_store_commit_seconds"
)

// e2eConfig is the workload of the e2e benchmark.
type e2eConfig struct {
	targets   []int // one run per count
	period    time.Duration
	duration  time.Duration
	warmup    time.Duration
	probedBin string
	svg       string
	workers   int // concurrent registrations
	windows   int // measured windows per contestant
	// perListener targets share one listener (port) of the targets child.
	perListener int
}

func (c *e2eConfig) register(fs *flag.FlagSet) {
	targetsFlag(fs, &c.targets)
	fs.DurationVar(&c.period, "period", time.Second, "probe period of every target")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window of each contestant")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "warm-up after registration, before the window")
	fs.StringVar(&c.probedBin, "probed-bin", "", "probed binary to run (default: cmd/probed of this repository, built into a temporary directory)")
	fs.StringVar(&c.svg, "svg", "", "write a plot of CPU per probe against targets (SVG) to this file")
	fs.IntVar(&c.workers, "workers", 32, "concurrent CreateTarget calls while registering")
	fs.IntVar(&c.windows, "windows", 1, "consecutive windows measured per contestant; the median one is reported (a shared machine's noise shows as their spread)")
	fs.IntVar(&c.perListener, "targets-per-listener", 1, "targets sharing one loopback listener (port) of the targets child (more than 1 keeps 10,000 targets within a file descriptor limit of 20,000)")
}

func (c *e2eConfig) validate() error {
	if err := checkTargetsAndPeriod(&c.targets, c.period); err != nil {
		return err
	}
	switch {
	case c.duration <= 0, c.warmup < 0, c.workers < 1, c.windows < 1, c.perListener < 1:
		return fmt.Errorf("--duration, --workers, --windows and --targets-per-listener must be positive, --warmup not negative")
	}
	return nil
}

// e2eResult is what one contestant cost over its window.
type e2eResult struct {
	WindowSeconds   float64 `json:"window_seconds"`
	Probes          int64   `json:"probes"`          // probes (requests) run in the window
	ProbesExpected  int64   `json:"probes_expected"` // targets × whole periods in the window
	Failed          int64   `json:"failed"`          // of them, not successful
	CPUSeconds      float64 `json:"cpu_seconds"`     // user + sys of the process over the window
	CPUUsPerProbe   float64 `json:"cpu_us_per_probe"`
	ProbesPerSecond float64 `json:"probes_per_second"`
	RSSBytes        int64   `json:"rss_bytes"` // peak over the process's life
	// LatenessMs is the scheduler lateness over the window (probed only,
	// from its Prometheus histogram): p50 and p99 are bucket upper bounds
	// (0.5, 1, 2.5, 5, 10, 25, 50, 100 ms; -1 means above 100 ms), mean is
	// exact.
	LatenessMs *bucketLatency `json:"lateness_ms,omitempty"`
	// WindowsCPUUsPerProbe: with --windows > 1, the CPU per probe of
	// every window; the figures above are the median window's.
	WindowsCPUUsPerProbe []float64 `json:"windows_cpu_us_per_probe,omitempty"`
}

// bucketLatency summarises a Prometheus histogram, in milliseconds.
type bucketLatency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

func newE2EResult(cpu time.Duration, probes, expected int64, window time.Duration, rss int64) e2eResult {
	r := e2eResult{
		WindowSeconds:  window.Seconds(),
		Probes:         probes,
		ProbesExpected: expected,
		CPUSeconds:     cpu.Seconds(),
		RSSBytes:       rss,
	}
	if probes > 0 {
		r.CPUUsPerProbe = float64(cpu.Microseconds()) / float64(probes)
	}
	if window > 0 {
		r.ProbesPerSecond = float64(probes) / window.Seconds()
	}
	return r
}

// expectedProbes is the number of probes n targets run in window.
func expectedProbes(n int, window, period time.Duration) int64 {
	return int64(n) * int64(window/period)
}

// e2eReport is the result for one number of targets. The top-level
// figures are probed's with keep-alive (its default); kubelet_style is
// probed with a new connection per probe; floor is a bare net/http loop,
// socket_floor a bare socket loop (one connection per target, a request
// built once, the answer parsed with bufio).
type e2eReport struct {
	Targets                  int       `json:"targets"`
	PeriodMs                 float64   `json:"period_ms"`
	CPUUsPerProbe            float64   `json:"cpu_us_per_probe"`
	ProbesPerSecond          float64   `json:"probes_per_second"`
	RSSBytes                 int64     `json:"rss_bytes"`
	FloorCPUUsPerProbe       float64   `json:"floor_cpu_us_per_probe"`
	SocketFloorCPUUsPerProbe float64   `json:"socket_floor_cpu_us_per_probe"`
	KeepAlive                e2eResult `json:"keep_alive"`
	KubeletStyle             e2eResult `json:"kubelet_style"`
	Floor                    e2eResult `json:"floor"`
	SocketFloor              e2eResult `json:"socket_floor"`
	Ratio                    e2eRatio  `json:"ratio"`
}

// e2eRatio compares CPU per probe.
type e2eRatio struct {
	// KubeletStyleCPU: new connection per probe / keep-alive.
	KubeletStyleCPU float64 `json:"kubelet_style_cpu"`
	// VsFloorCPU: probed keep-alive / the bare net/http loop.
	VsFloorCPU float64 `json:"vs_floor_cpu"`
	// VsSocketFloorCPU: probed keep-alive / the bare socket loop.
	VsSocketFloorCPU float64 `json:"vs_socket_floor_cpu"`
}

func newE2EReport(n int, period time.Duration, keep, kubelet, floor, socket e2eResult) e2eReport {
	return e2eReport{
		Targets:                  n,
		PeriodMs:                 ms(period),
		CPUUsPerProbe:            keep.CPUUsPerProbe,
		ProbesPerSecond:          keep.ProbesPerSecond,
		RSSBytes:                 keep.RSSBytes,
		FloorCPUUsPerProbe:       floor.CPUUsPerProbe,
		SocketFloorCPUUsPerProbe: socket.CPUUsPerProbe,
		KeepAlive:                keep,
		KubeletStyle:             kubelet,
		Floor:                    floor,
		SocketFloor:              socket,
		Ratio: e2eRatio{
			KubeletStyleCPU:  ratio(kubelet.CPUUsPerProbe, keep.CPUUsPerProbe),
			VsFloorCPU:       ratio(keep.CPUUsPerProbe, floor.CPUUsPerProbe),
			VsSocketFloorCPU: ratio(keep.CPUUsPerProbe, socket.CPUUsPerProbe),
		},
	}
}

// runE2E is the e2e subcommand.
func runE2E(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("e2e", stderr, "also print the result as JSON on the last line (an object, or an array with several --targets)",
		"Starts N loopback HTTP targets (a child process) and a real probed (another",
		"child), registers the targets over gRPC and measures the server's CPU per probe",
		"with keep-alive (probed's default) and with a new connection per probe (kubelet",
		"style), then two bare client loops over the same targets: net/http (the floor)",
		"and a socket per target with a request built once (the socket floor).")
	var cfg e2eConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	dir, stderr, cleanup, err := childRun(ctx, "e2e", &cfg.probedBin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	most := slices.Max(cfg.targets)
	targets, err := startTargets(ctx, (most+cfg.perListener-1)/cfg.perListener, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = targets.stop() }()

	var reports []e2eReport
	for _, n := range cfg.targets {
		r, err := measureE2E(ctx, cfg, dir, targetPorts(targets.ports, n, cfg.perListener), stderr)
		if err != nil {
			return err
		}
		if err := printE2ETable(stdout, cfg, r); err != nil {
			return err
		}
		reports = append(reports, r)
	}
	if cfg.svg != "" {
		if err := writeFile(cfg.svg, e2eChart(cfg, reports).writeSVG); err != nil {
			return err
		}
	}
	if !*asJSON {
		return nil
	}
	if len(reports) == 1 {
		return writeJSONLine(stdout, reports[0])
	}
	return writeJSONLine(stdout, reports)
}

// targetPorts returns the port of each of n targets, perListener of them
// on each listener of ports.
func targetPorts(ports []int, n, perListener int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = ports[i/perListener]
	}
	return out
}

// measureE2E runs the four contestants over ports (one per target), one
// after the other.
func measureE2E(ctx context.Context, cfg e2eConfig, dir string, ports []int, stderr io.Writer) (e2eReport, error) {
	n := len(ports)
	var res [2]e2eResult
	for i, noKeepAlive := range []bool{false, true} {
		name := map[bool]string{false: "keep-alive", true: "kubelet-style (new connection per probe)"}[noKeepAlive]
		fmt.Fprintf(stderr, "e2e: probed, %s: %d targets every %v, %v warm-up + %v measured\n", name, n, cfg.period, cfg.warmup, cfg.duration)
		r, err := measureProbed(ctx, cfg, filepath.Join(dir, fmt.Sprintf("data-%d-%d", n, i)), ports, noKeepAlive, stderr)
		if err != nil {
			return e2eReport{}, fmt.Errorf("probed %s: %w", name, err)
		}
		res[i] = r
	}
	portsFile := filepath.Join(dir, fmt.Sprintf("ports-%d.json", n))
	b, err := json.Marshal(targetsHello{Ports: ports})
	if err != nil {
		return e2eReport{}, err
	}
	if err := os.WriteFile(portsFile, b, 0o600); err != nil {
		return e2eReport{}, err
	}
	var floors [2]e2eResult
	for i, client := range []string{floorNetHTTP, floorSocket} {
		fmt.Fprintf(stderr, "e2e: floor (bare %s loop, keep-alive): %d targets every %v\n", client, n, cfg.period)
		fc := floorConfig{portsFile: portsFile, client: client, period: cfg.period, duration: cfg.duration, warmup: cfg.warmup, windows: cfg.windows}
		if err := runChild(ctx, stderr, &floors[i], append([]string{e2eFloorCommand}, fc.args()...)...); err != nil {
			return e2eReport{}, err
		}
	}
	return newE2EReport(n, cfg.period, res[0], res[1], floors[0], floors[1]), nil
}

// measureProbed runs one probed over ports and measures its window.
func measureProbed(ctx context.Context, cfg e2eConfig, dataDir string, ports []int, noKeepAlive bool, stderr io.Writer) (e2eResult, error) {
	p, err := startProbed(ctx, probedOptions{bin: cfg.probedBin, dataDir: dataDir, minPeriod: min(cfg.period, 100*time.Millisecond)}, stderr)
	if err != nil {
		return e2eResult{}, err
	}
	defer func() { _ = p.stop() }()
	start := time.Now()
	target := func(i int) *probev1.Target {
		return httpTarget(fmt.Sprintf("e2e-%05d", i), ports[i], cfg.period, noKeepAlive)
	}
	if err := registerAll(ctx, p.client, len(ports), cfg.workers, target); err != nil {
		return e2eResult{}, err
	}
	fmt.Fprintf(stderr, "e2e: registered %d targets in %v\n", len(ports), time.Since(start).Round(time.Millisecond))
	if err := sleep(ctx, cfg.warmup); err != nil {
		return e2eResult{}, err
	}
	windows := make([]e2eResult, cfg.windows)
	for i := range windows {
		if windows[i], err = p.measureWindow(ctx, cfg, len(ports)); err != nil {
			return e2eResult{}, err
		}
	}
	r := medianWindow(windows)
	if r.RSSBytes, err = p.peakRSS(); err != nil {
		return e2eResult{}, err
	}
	return r, nil
}

// measureWindow measures the server over one window of cfg.duration.
func (p *probedProc) measureWindow(ctx context.Context, cfg e2eConfig, targets int) (e2eResult, error) {
	before, err := p.counters(ctx)
	if err != nil {
		return e2eResult{}, err
	}
	cpu0, err := p.cpu()
	if err != nil {
		return e2eResult{}, err
	}
	t0 := time.Now()
	if err := sleep(ctx, cfg.duration); err != nil {
		return e2eResult{}, err
	}
	cpu1, err := p.cpu()
	if err != nil {
		return e2eResult{}, err
	}
	window := time.Since(t0)
	after, err := p.counters(ctx)
	if err != nil {
		return e2eResult{}, err
	}
	r := newE2EResult(cpu1-cpu0, int64(after.probes-before.probes), expectedProbes(targets, window, cfg.period), window, 0)
	r.Failed = int64(after.failed - before.failed)
	if after.lateness.counts != nil {
		r.LatenessMs = summarizeLateness(after.lateness.minus(before.lateness))
	}
	return r, nil
}

// medianWindow returns the window with the median CPU per probe (the
// lower middle one of an even count), with the CPU per probe of every
// window in WindowsCPUUsPerProbe, in the order measured.
func medianWindow(windows []e2eResult) e2eResult {
	all := make([]float64, len(windows))
	for i, w := range windows {
		all[i] = w.CPUUsPerProbe
	}
	sorted := slices.Clone(windows)
	slices.SortFunc(sorted, func(a, b e2eResult) int { return cmp.Compare(a.CPUUsPerProbe, b.CPUUsPerProbe) })
	r := sorted[(len(sorted)-1)/2]
	if len(windows) > 1 {
		r.WindowsCPUUsPerProbe = all
	}
	return r
}

// probedCounters are the server's cumulative counters at one moment.
type probedCounters struct {
	probes, failed float64
	lateness       promHist // zero without metrics
}

// counters reads the probe counters from /metrics, or, when this build
// has none, sums probesTotal over every target (a heavier call).
func (p *probedProc) counters(ctx context.Context) (probedCounters, error) {
	ss, err := p.scrape(ctx)
	if err == nil {
		var c probedCounters
		for _, s := range ss {
			if s.name == metricProbes {
				c.probes += s.value
				if s.labels["result"] != "successful" {
					c.failed += s.value
				}
			}
		}
		if h, err := promHistogram(ss, metricLateness); err == nil {
			c.lateness = h
		}
		return c, nil
	}
	targets, lerr := p.client.ListAll(ctx, nil)
	if lerr != nil {
		return probedCounters{}, fmt.Errorf("no metrics (%w), and ListTargets: %w", err, lerr)
	}
	var c probedCounters
	for _, t := range targets {
		c.probes += float64(t.GetStatus().GetReadiness().GetProbesTotal())
	}
	return c, nil
}

// summarizeLateness turns a histogram of seconds into milliseconds; -1
// stands for a quantile above the last finite bound.
func summarizeLateness(h promHist) *bucketLatency {
	conv := func(s float64) float64 {
		switch {
		case math.IsNaN(s):
			return 0
		case math.IsInf(s, 1):
			return -1
		}
		return s * 1000
	}
	return &bucketLatency{P50: conv(h.quantile(0.5)), P99: conv(h.quantile(0.99)), Mean: conv(h.mean())}
}

// registerAll creates the targets target(0) … target(n-1), workers at a
// time.
func registerAll(ctx context.Context, c *client.Client, n, workers int, target func(i int) *probev1.Target) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				t := target(i)
				if _, err := c.Create(ctx, t); err != nil {
					errs <- fmt.Errorf("create %s: %w", t.GetName(), err)
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// httpTarget is a target with one HTTP readiness probe of 127.0.0.1:port
// every period.
func httpTarget(name string, port int, period time.Duration, noKeepAlive bool) *probev1.Target {
	p := &probev1.Probe{Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
		Host: "127.0.0.1", Port: int32(port), Path: "/healthz", DisableKeepAlive: noKeepAlive,
	}}}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(period)
	return &probev1.Target{Name: name, ReadinessProbe: p}
}

// printE2ETable prints one report.
func printE2ETable(w io.Writer, cfg e2eConfig, r e2eReport) error {
	fmt.Fprintf(w, "e2e: %d HTTP targets on loopback, probed every %v, %v measured after %v warm-up, GOMAXPROCS %d\n\n",
		r.Targets, cfg.period, cfg.duration, cfg.warmup, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	k, n, fl, so := r.KeepAlive, r.KubeletStyle, r.Floor, r.SocketFloor
	lat := func(x *bucketLatency, pick func(*bucketLatency) float64) string {
		if x == nil {
			return "-"
		}
		if v := pick(x); v >= 0 {
			return f(v, 2)
		}
		return ">100"
	}
	rel := func(x, to e2eResult) string { return f(ratio(x.CPUUsPerProbe, to.CPUUsPerProbe), 2) + "x" }
	rows := []struct{ name, keep, kubelet, floor, socket string }{
		{"probes expected", d(k.ProbesExpected), d(n.ProbesExpected), d(fl.ProbesExpected), d(so.ProbesExpected)},
		{"probes run", d(k.Probes), d(n.Probes), d(fl.Probes), d(so.Probes)},
		{"failed", d(k.Failed), d(n.Failed), d(fl.Failed), d(so.Failed)},
		{"probes/s", f(k.ProbesPerSecond, 0), f(n.ProbesPerSecond, 0), f(fl.ProbesPerSecond, 0), f(so.ProbesPerSecond, 0)},
		{"cpu seconds", f(k.CPUSeconds, 2), f(n.CPUSeconds, 2), f(fl.CPUSeconds, 2), f(so.CPUSeconds, 2)},
		{"cpu µs per probe", f(k.CPUUsPerProbe, 1), f(n.CPUUsPerProbe, 1), f(fl.CPUUsPerProbe, 1), f(so.CPUUsPerProbe, 1)},
		{"  relative to net/http", rel(k, fl), rel(n, fl), "1.00x", rel(so, fl)},
		{"  relative to socket", rel(k, so), rel(n, so), rel(fl, so), "1.00x"},
		{"peak rss MiB", f(mib(k.RSSBytes), 1), f(mib(n.RSSBytes), 1), f(mib(fl.RSSBytes), 1), f(mib(so.RSSBytes), 1)},
		{"lateness p50 ms (≤)", lat(k.LatenessMs, func(x *bucketLatency) float64 { return x.P50 }), lat(n.LatenessMs, func(x *bucketLatency) float64 { return x.P50 }), "-", "-"},
		{"lateness p99 ms (≤)", lat(k.LatenessMs, func(x *bucketLatency) float64 { return x.P99 }), lat(n.LatenessMs, func(x *bucketLatency) float64 { return x.P99 }), "-", "-"},
		{"lateness mean ms", lat(k.LatenessMs, func(x *bucketLatency) float64 { return x.Mean }), lat(n.LatenessMs, func(x *bucketLatency) float64 { return x.Mean }), "-", "-"},
	}
	fmt.Fprintf(tw, "%-22s\tprobed keep-alive\tprobed kubelet-style\tnet/http loop\tsocket loop\t\n", "")
	for _, row := range rows {
		fmt.Fprintf(tw, "%-22s\t%s\t%s\t%s\t%s\t\n", row.name, row.keep, row.kubelet, row.floor, row.socket)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nkubelet-style / keep-alive CPU per probe: %.2fx; keep-alive / net/http loop: %.2fx; keep-alive / socket loop: %.2fx\n\n",
		r.Ratio.KubeletStyleCPU, r.Ratio.VsFloorCPU, r.Ratio.VsSocketFloorCPU)
	return err
}

// e2eChart plots CPU per probe against the number of targets.
func e2eChart(cfg e2eConfig, reports []e2eReport) chart {
	series := []chartSeries{
		{name: "probed, new connection per probe (kubelet style)"},
		{name: "probed, keep-alive (default)"},
		{name: "bare net/http loop, keep-alive (floor)", dashed: true},
		{name: "bare socket loop, keep-alive (socket floor)", dashed: true},
	}
	for _, r := range reports {
		x := float64(r.Targets)
		series[0].points = append(series[0].points, point{x, r.KubeletStyle.CPUUsPerProbe})
		series[1].points = append(series[1].points, point{x, r.KeepAlive.CPUUsPerProbe})
		series[2].points = append(series[2].points, point{x, r.Floor.CPUUsPerProbe})
		series[3].points = append(series[3].points, point{x, r.SocketFloor.CPUUsPerProbe})
	}
	return chart{
		title:  fmt.Sprintf("CPU per HTTP probe on loopback (period %v, %d cores)", cfg.period, runtime.NumCPU()),
		xLabel: "targets",
		yLabel: "CPU µs per probe (user + sys)",
		logX:   true,
		series: series,
		marks:  true,
	}
}

// writeFile writes a file with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
