package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Prometheus series the scale benchmark reads from probed.
const (
	metricGoroutines = "go_goroutines"
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricHeapAlloc  = "go_memstats_alloc_bytes"
	metricStackInuse = "go_memstats_stack_inuse_bytes"
	metricInflight   = "probed_probes_inflight"
)

// scaleConfig is the workload of the scale benchmark.
type scaleConfig struct {
	targets     []int // one run per count
	period      time.Duration
	settle      time.Duration
	window      time.Duration
	probedBin   string
	svg         string
	compare     string
	heapProfile string
	replot      string
	workers     int
	perListener int
	fdMargin    int

	shares mixShares
}

func (c *scaleConfig) register(fs *flag.FlagSet) {
	targetsFlag(fs, &c.targets)
	fs.DurationVar(&c.period, "period", 10*time.Second, "probe period of every target")
	fs.DurationVar(&c.settle, "settle", 0, "wait after registration (and after the restart) before the window (0: one period and 5s, so that every target has been probed again, its connection kept alive, after the restart too)")
	fs.DurationVar(&c.window, "window", 0, "measured window: CPU, probes and failures; RSS and goroutines at its end (0: one period, so that every target is probed once in it)")
	fs.StringVar(&c.probedBin, "probed-bin", "", "probed binary to run (default: cmd/probed of this repository, built into a temporary directory)")
	fs.StringVar(&c.svg, "svg", "", "write a plot of RSS and goroutines against targets (SVG) to this file")
	fs.StringVar(&c.compare, "compare", "", "a JSON report of an earlier run (the last line of --json); each figure is printed beside it")
	fs.StringVar(&c.replot, "replot", "", "run nothing: write the --svg plot of an earlier run's JSON (as --compare reads it)")
	fs.StringVar(&c.heapProfile, "heap-profile", "", "save a heap profile of each probed at the end of its window to this file, with the number of targets inserted before the extension (and -restarted after it for the probed restarted), and its /metrics beside it, and report the live heap after that collection (needs a probed with --pprof; GODEBUG=memprofilerate=4096 samples finer)")
	fs.IntVar(&c.workers, "workers", 64, "concurrent CreateTarget calls while registering")
	fs.Float64Var(&c.shares.http, "http", 0.5, "share of the targets probed over HTTP (the others over TCP, unless --grpc or --exec)")
	fs.Float64Var(&c.shares.keepAlive, "keep-alive", 0.5, "share of the HTTP targets that keep their connection alive (probed's default; the others set disableKeepAlive)")
	fs.Float64Var(&c.shares.grpc, "grpc", 0, "share of the targets probed with gRPC health (the targets' servers answer it on every port)")
	fs.Float64Var(&c.shares.exec, "exec", 0, "share of the targets probed by running "+strings.Join(execCommand, " ")+" (probed runs with --allow-exec)")
	fs.IntVar(&c.perListener, "targets-per-listener", 100, "targets sharing one loopback listener (port) of the targets' servers")
	fs.IntVar(&c.fdMargin, "fd-margin", 3000, "file descriptors of probed's hard limit (ulimit -Hn) kept free of kept-alive connections")
}

func (c *scaleConfig) validate() error {
	if err := checkTargetsAndPeriod(&c.targets, c.period); err != nil {
		return err
	}
	if c.settle == 0 {
		c.settle = c.period + 5*time.Second
	}
	if c.window == 0 {
		c.window = c.period
	}
	switch {
	case c.settle < 0, c.window <= 0:
		return fmt.Errorf("--window must be positive, --settle not negative")
	case c.workers < 1, c.perListener < 1, c.fdMargin < 0:
		return fmt.Errorf("--workers and --targets-per-listener must be positive, --fd-margin not negative")
	case c.shares.http < 0, c.shares.keepAlive < 0, c.shares.grpc < 0, c.shares.exec < 0, c.shares.keepAlive > 1,
		c.shares.http+c.shares.grpc+c.shares.exec > 1:
		return fmt.Errorf("--http, --keep-alive, --grpc and --exec are shares, from 0 to 1, and --http, --grpc and --exec add up to at most 1")
	case c.replot != "" && c.svg == "":
		return fmt.Errorf("--replot needs --svg")
	}
	return nil
}

// runScale is the scale subcommand.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("scale", stderr, "also print the result as JSON on the last line (an object, or an array with several --targets)",
		"Starts loopback target servers (child processes) and a real probed (bbolt store",
		"in a temporary directory), registers N targets over gRPC (one readiness probe",
		"each: half HTTP, half of those kept alive, half TCP; or gRPC health and exec",
		"shares), and reports registrations/s, RSS per target, goroutines (and those above",
		"the empty server's), CPU per probe, the time to list every target page by page,",
		"and the same after a restart, with the restart's time to serving.")
	var cfg scaleConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	if cfg.replot != "" {
		reports, err := readScaleReports(cfg.replot)
		if err != nil {
			return err
		}
		return writeFile(cfg.svg, func(w io.Writer) error { return writeSVGPanels(w, scaleCharts(reports)...) })
	}
	var baseline []scaleReport
	if cfg.compare != "" {
		var err error
		if baseline, err = readScaleReports(cfg.compare); err != nil {
			return err
		}
	}
	dir, stderr, cleanup, err := childRun(ctx, "scale", &cfg.probedBin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	ports, stopTargets, err := startScaleTargets(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer stopTargets()

	var reports []scaleReport
	for _, n := range cfg.targets {
		r, err := measureScale(ctx, cfg, filepath.Join(dir, fmt.Sprintf("data-%d", n)), n, ports, stderr)
		if err != nil {
			return fmt.Errorf("%d targets: %w", n, err)
		}
		if err := printScaleTable(stdout, cfg, r, findScaleReport(baseline, n)); err != nil {
			return err
		}
		reports = append(reports, r)
	}
	if cfg.svg != "" {
		if err := writeFile(cfg.svg, func(w io.Writer) error { return writeSVGPanels(w, scaleCharts(reports)...) }); err != nil {
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

// targetsPerChild bounds the targets one targets child serves, so that
// its kept-alive connections stay well inside a file descriptor limit of
// 20,000.
const targetsPerChild = 25_000

// startScaleTargets starts the target servers for the largest run: as
// many children as targetsPerChild needs, each with one listener per
// perListener targets. It returns every listener's port.
func startScaleTargets(ctx context.Context, cfg scaleConfig, stderr io.Writer) ([]int, func(), error) {
	n := 0
	for _, t := range cfg.targets {
		n = max(n, t)
	}
	children := (n + targetsPerChild - 1) / targetsPerChild
	var procs []*targetsProc
	stop := func() {
		for _, p := range procs {
			_ = p.stop()
		}
	}
	var ports []int
	share := (n + children - 1) / children
	listeners := (share + cfg.perListener - 1) / cfg.perListener
	for range children {
		p, err := startTargets(ctx, listeners, stderr)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, p)
		ports = append(ports, p.ports...)
	}
	fmt.Fprintf(stderr, "scale: %d target server processes, %d loopback listeners\n", children, len(ports))
	return ports, stop, nil
}

// keepAliveLimit returns how many kept-alive connections probed can hold:
// its file descriptor hard limit (probed raises its soft limit to it, and
// it inherits this process's) minus margin; 0 when there is no limit. A
// margin that leaves no room is an error.
func keepAliveLimit(margin int) (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Max > 1<<30 { // RLIM_INFINITY or as good as
		return 0, nil
	}
	if int(rl.Max) <= margin {
		return 0, fmt.Errorf("the file descriptor limit (ulimit -Hn) is %d: no room for kept-alive connections beside --fd-margin %d", rl.Max, margin)
	}
	return int(rl.Max) - margin, nil
}

// measureScale runs one probed with n targets through registration, a
// window, listing, a restart and another window.
func measureScale(ctx context.Context, cfg scaleConfig, dataDir string, n int, ports []int, stderr io.Writer) (scaleReport, error) {
	limit, err := keepAliveLimit(cfg.fdMargin)
	if err != nil {
		return scaleReport{}, err
	}
	r := scaleReport{Targets: n, PeriodMs: ms(cfg.period), Mix: newScaleMix(n, cfg.shares, limit), Workers: cfg.workers}
	r.LoadAverage[0] = loadAverage()
	if r.Mix.KeepAliveLimit > 0 {
		fmt.Fprintf(stderr, "scale: the file descriptor limit (ulimit -Hn) allows %d kept-alive connections: %d targets keep theirs alive instead of %d\n",
			limit, r.Mix.HTTPKeepAlive, newScaleMix(n, cfg.shares, 0).HTTPKeepAlive)
	}
	opts := probedOptions{bin: cfg.probedBin, dataDir: dataDir, minPeriod: min(cfg.period, 100*time.Millisecond)}
	known, err := probedproc.Flags(ctx, cfg.probedBin)
	if err != nil {
		return scaleReport{}, err
	}
	if known["max-targets"] {
		opts.extra = append(opts.extra, "--max-targets=0")
	}
	if r.Mix.Exec > 0 {
		opts.extra = append(opts.extra, "--allow-exec")
	}
	if cfg.heapProfile != "" {
		if !known["pprof"] {
			return scaleReport{}, fmt.Errorf("--heap-profile: %s has no --pprof flag", cfg.probedBin)
		}
		opts.extra = append(opts.extra, "--pprof")
	}

	fmt.Fprintf(stderr, "scale: %d targets (%s) every %v\n", n, r.Mix, cfg.period)
	p, err := startProbed(ctx, opts, stderr)
	if err != nil {
		return scaleReport{}, err
	}
	defer func() { // the probed running at the time
		if p != nil {
			_ = p.stop()
		}
	}()
	r.StartupSeconds = p.startup.Seconds()
	if r.BaseRSSBytes, err = procs.RSS(p.Pid()); err != nil {
		return scaleReport{}, err
	}
	if ss, err := p.scrape(ctx); err == nil {
		v, _ := promSum(ss, metricGoroutines)
		r.BaseGoroutines = int(v)
	}
	start := time.Now()
	target := func(i int) *probev1.Target { return scaleTarget(i, r.Mix, ports[i%len(ports)], cfg.period) }
	if err := registerAll(ctx, p.client, n, cfg.workers, target); err != nil {
		return scaleReport{}, err
	}
	reg := time.Since(start)
	r.RegistrationSeconds = reg.Seconds()
	r.RegistrationsPerSecond = float64(n) / reg.Seconds()
	fmt.Fprintf(stderr, "scale: registered %d targets in %v (%.0f/s)\n", n, reg.Round(time.Millisecond), r.RegistrationsPerSecond)
	if r.Fresh, err = p.measureState(ctx, cfg, r); err != nil {
		return scaleReport{}, err
	}
	if err := p.profileHeap(ctx, cfg, numberedPath(cfg.heapProfile, n, ""), &r.Fresh, stderr); err != nil {
		return scaleReport{}, err
	}
	if r.List, err = listEvery(ctx, p.client); err != nil {
		return scaleReport{}, err
	}
	if r.List.Targets != n {
		return scaleReport{}, fmt.Errorf("ListTargets returned %d targets over %d pages, want %d", r.List.Targets, r.List.Pages, n)
	}
	fmt.Fprintf(stderr, "scale: listed %d targets in %d pages in %.2fs\n", n, r.List.Pages, r.List.Seconds)

	start = time.Now()
	err = p.stop()
	p = nil
	if err != nil {
		return scaleReport{}, fmt.Errorf("stopping probed: %w", err)
	}
	r.StopSeconds = time.Since(start).Seconds()
	if p, err = startProbed(ctx, opts, stderr); err != nil {
		return scaleReport{}, fmt.Errorf("restarting probed: %w", err)
	}
	r.RestartSeconds = p.startup.Seconds()
	fmt.Fprintf(stderr, "scale: restarted, serving after %.2fs\n", r.RestartSeconds)
	if r.Restarted, err = p.measureState(ctx, cfg, r); err != nil {
		return scaleReport{}, err
	}
	if err := p.profileHeap(ctx, cfg, numberedPath(cfg.heapProfile, n, "-restarted"), &r.Restarted, stderr); err != nil {
		return scaleReport{}, err
	}
	r.LoadAverage[1] = loadAverage()
	return r, nil
}

// loadAverage returns the 1-minute load average (0 if unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// measureState waits cfg.settle, then measures the server over a window
// of cfg.window.
func (p *probedProc) measureState(ctx context.Context, cfg scaleConfig, r scaleReport) (scaleState, error) {
	if err := sleep(ctx, cfg.settle); err != nil {
		return scaleState{}, err
	}
	w, err := p.measureWindow(ctx, e2eConfig{period: cfg.period, duration: cfg.window}, r.Targets)
	if err != nil {
		return scaleState{}, err
	}
	s := scaleState{ProbesPerSecond: w.ProbesPerSecond, ProbesFailed: w.Failed, CPUUsPerProbe: w.CPUUsPerProbe}
	if s.RSSBytes, s.RSSAnonBytes, s.RSSFileBytes, err = procs.RSSParts(p.Pid()); err != nil {
		return scaleState{}, err
	}
	if s.PeakRSSBytes, err = p.peakRSS(); err != nil {
		return scaleState{}, err
	}
	s.RSSBytesPerTarget = float64(s.RSSBytes-r.BaseRSSBytes) / float64(r.Targets)
	ss, err := p.scrape(ctx)
	if err != nil {
		return scaleState{}, err
	}
	gauge := func(name string) int64 {
		v, _ := promSum(ss, name)
		return int64(v)
	}
	s.Goroutines = int(gauge(metricGoroutines))
	s.GoroutinesAboveEmpty = s.Goroutines - r.BaseGoroutines
	s.ProbesInflight = int(gauge(metricInflight))
	s.HeapInuseBytes = gauge(metricHeapInuse)
	s.StackInuseBytes = gauge(metricStackInuse)
	return s, nil
}

// listEvery lists every target, page after page of the largest size.
func listEvery(ctx context.Context, c *client.Client) (scaleList, error) {
	var l scaleList
	opts := client.ListOptions{PageSize: 1000}
	start := time.Now()
	for {
		t0 := time.Now()
		page, next, err := c.List(ctx, opts)
		if err != nil {
			return l, fmt.Errorf("ListTargets page %d: %w", l.Pages+1, err)
		}
		d := ms(time.Since(t0))
		if l.Pages == 0 {
			l.FirstPageMs = d
		}
		l.MaxPageMs = max(l.MaxPageMs, d)
		l.Pages++
		l.Targets += len(page)
		if next == "" {
			break
		}
		opts.PageToken = next
	}
	l.Seconds = time.Since(start).Seconds()
	return l, nil
}

// profileHeap, with --heap-profile, saves the server's heap profile to
// path and records the live heap after its collection in s.
func (p *probedProc) profileHeap(ctx context.Context, cfg scaleConfig, path string, s *scaleState, stderr io.Writer) error {
	if cfg.heapProfile == "" {
		return nil
	}
	if err := p.saveHeapProfile(ctx, path); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "scale: heap profile in %s\n", path)
	b, err := os.ReadFile(path + ".metrics")
	if err != nil {
		return err
	}
	ss, err := parsePromText(bytes.NewReader(b))
	if err != nil {
		return err
	}
	v, _ := promSum(ss, metricHeapAlloc)
	s.LiveHeapBytes = int64(v)
	return nil
}

// saveHeapProfile saves the server's heap profile (after a collection) to
// path, and its metrics of the same moment (go_memstats_*: where the RSS
// that is not heap goes) to path + ".metrics".
func (p *probedProc) saveHeapProfile(ctx context.Context, path string) error {
	b, err := p.get(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if b, err = p.get(ctx, "/metrics"); err != nil {
		return err
	}
	return os.WriteFile(path+".metrics", b, 0o600)
}

// numberedPath inserts n and suffix before the extension of path:
// heap.pb.gz, 1000, "-restarted" -> heap-1000-restarted.pb.gz.
func numberedPath(path string, n int, suffix string) string {
	dir, base := filepath.Split(path)
	name, ext, _ := strings.Cut(base, ".")
	if ext != "" {
		ext = "." + ext
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d%s%s", name, n, suffix, ext))
}
