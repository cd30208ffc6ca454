package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Prometheus series the scale benchmark reads from probed.
const (
	metricGoroutines = "go_goroutines"
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
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

	httpShare, keepAliveShare float64
}

func (c *scaleConfig) register(fs *flag.FlagSet) {
	targetsFlag(fs, &c.targets)
	fs.DurationVar(&c.period, "period", 10*time.Second, "probe period of every target")
	fs.DurationVar(&c.settle, "settle", 0, "wait after registration (and after the restart) before the window (0: one period and 5s, so that every target has been probed again, its connection kept alive, after the restart too)")
	fs.DurationVar(&c.window, "window", 0, "measured window: CPU, probes and failures; RSS and goroutines at its end (0: one period, so that every target is probed once in it)")
	fs.StringVar(&c.probedBin, "probed-bin", "", "probed binary to run (default: go build "+probedPackage+" into a temporary directory)")
	fs.StringVar(&c.svg, "svg", "", "write a plot of RSS and goroutines against targets (SVG) to this file")
	fs.StringVar(&c.compare, "compare", "", "a JSON report of an earlier run (the last line of --json); each figure is printed beside it")
	fs.StringVar(&c.replot, "replot", "", "run nothing: write the --svg plot of an earlier run's JSON (as --compare reads it)")
	fs.StringVar(&c.heapProfile, "heap-profile", "", "save a heap profile of each fresh probed (before the restart) to this file, with the number of targets inserted before the extension, and its /metrics beside it (needs a probed with --pprof; GODEBUG=memprofilerate=4096 samples finer)")
	fs.IntVar(&c.workers, "workers", 64, "concurrent CreateTarget calls while registering")
	fs.Float64Var(&c.httpShare, "http", 0.5, "share of the targets probed over HTTP (the others over TCP)")
	fs.Float64Var(&c.keepAliveShare, "keep-alive", 0.5, "share of the HTTP targets that keep their connection alive (probed's default; the others set disableKeepAlive)")
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
	case c.httpShare < 0, c.httpShare > 1, c.keepAliveShare < 0, c.keepAliveShare > 1:
		return fmt.Errorf("--http and --keep-alive are shares, from 0 to 1")
	case c.replot != "" && c.svg == "":
		return fmt.Errorf("--replot needs --svg")
	}
	return nil
}

// scaleMix is how many targets of each kind a run registers: by default
// half HTTP (half of those keeping their connection alive, probed's
// default, the other half with disableKeepAlive) and half TCP; fewer kept
// alive when the file descriptor limit would not hold them (the rest are
// HTTP with a new connection per probe).
type scaleMix struct {
	HTTPKeepAlive     int `json:"http_keep_alive"`
	HTTPNewConnection int `json:"http_new_connection"`
	TCP               int `json:"tcp"`
	// KeepAliveLimit is the most kept-alive connections the file
	// descriptor limit allows (0: none applied).
	KeepAliveLimit int `json:"keep_alive_limit,omitempty"`
}

// newScaleMix returns the mix of n targets, httpShare of them HTTP and
// keepAliveShare of those kept alive, at most keepAliveLimit (0: no
// limit).
func newScaleMix(n int, httpShare, keepAliveShare float64, keepAliveLimit int) scaleMix {
	http := int(math.Round(float64(n) * httpShare))
	m := scaleMix{HTTPKeepAlive: int(math.Round(float64(http) * keepAliveShare)), TCP: n - http}
	if keepAliveLimit > 0 && m.HTTPKeepAlive > keepAliveLimit {
		m.HTTPKeepAlive, m.KeepAliveLimit = keepAliveLimit, keepAliveLimit
	}
	m.HTTPNewConnection = http - m.HTTPKeepAlive
	return m
}

// kind returns the kind of target i of the mix: the HTTP targets are
// spread evenly among the TCP ones, the first HTTPKeepAlive of them kept
// alive.
func (m scaleMix) kind(i int) (http, keepAlive bool) {
	h := m.HTTPKeepAlive + m.HTTPNewConnection
	n := h + m.TCP
	before := i * h / n // HTTP targets before i
	if (i+1)*h/n == before {
		return false, false
	}
	return true, before < m.HTTPKeepAlive
}

// scaleState is what a probed holding the targets costs, measured at the
// end of a window.
type scaleState struct {
	RSSBytes          int64   `json:"rss_bytes"`
	RSSBytesPerTarget float64 `json:"rss_bytes_per_target"` // (RSS - the empty server's) / targets
	// RSSAnonBytes and RSSFileBytes split RSSBytes: anonymous memory (heap,
	// stacks) and mapped files (the binary, and the pages of the bbolt
	// file that probed has touched, which the kernel may drop).
	RSSAnonBytes    int64   `json:"rss_anon_bytes"`
	RSSFileBytes    int64   `json:"rss_file_bytes"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"` // over the process's life
	HeapInuseBytes  int64   `json:"heap_inuse_bytes"`
	StackInuseBytes int64   `json:"stack_inuse_bytes"`
	Goroutines      int     `json:"goroutines"`
	ProbesInflight  int     `json:"probes_inflight"`
	ProbesPerSecond float64 `json:"probes_per_second"` // over the window
	ProbesFailed    int64   `json:"probes_failed"`     // over the window
	CPUUsPerProbe   float64 `json:"cpu_us_per_probe"`  // over the window
}

// scaleList is the cost of listing every target, page after page.
type scaleList struct {
	Seconds     float64 `json:"seconds"`
	Pages       int     `json:"pages"`
	Targets     int     `json:"targets"`
	FirstPageMs float64 `json:"first_page_ms"`
	MaxPageMs   float64 `json:"max_page_ms"`
}

// scaleReport is the result for one number of targets.
type scaleReport struct {
	Targets  int      `json:"targets"`
	PeriodMs float64  `json:"period_ms"`
	Mix      scaleMix `json:"mix"`
	// RegistrationsPerSecond: targets / the time to create them all with
	// Workers concurrent calls.
	RegistrationsPerSecond float64    `json:"registrations_per_second"`
	RegistrationSeconds    float64    `json:"registration_seconds"`
	Workers                int        `json:"workers"`
	BaseRSSBytes           int64      `json:"base_rss_bytes"` // the empty server, at start
	StartupSeconds         float64    `json:"startup_seconds"`
	Fresh                  scaleState `json:"fresh"`
	List                   scaleList  `json:"list"`
	// RestartSeconds is the restart to serving: from the exec of the new
	// process to its first answered call (store opened and loaded, targets
	// restored, listening); StopSeconds the graceful stop before it.
	StopSeconds    float64    `json:"stop_seconds"`
	RestartSeconds float64    `json:"restart_seconds"`
	Restarted      scaleState `json:"restarted"`
	// LoadAverage is the machine's 1-minute load average at the start and
	// at the end of the run: on a shared machine, the timings (not the
	// memory) depend on it.
	LoadAverage [2]float64 `json:"load_average"`
}

// runScale is the scale subcommand.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("scale", stderr, "also print the result as JSON on the last line (an object, or an array with several --targets)",
		"Starts loopback target servers (child processes) and a real probed (bbolt store",
		"in a temporary directory), registers N targets over gRPC (one readiness probe",
		"each: half HTTP, half of those kept alive, half TCP), and reports registrations/s,",
		"RSS per target, goroutines, CPU per probe, the time to list every target page by",
		"page, and the same after a restart, with the restart's time to serving.")
	var cfg scaleConfig
	cfg.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
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
	stderr = &syncWriter{w: stderr}
	dir, err := tempDir("scale")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if cfg.probedBin, err = probedBinary(ctx, "scale", cfg.probedBin, dir, stderr); err != nil {
		return err
	}
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
// it inherits this process's) minus margin; 0 when there is no limit.
func keepAliveLimit(margin int) (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Max > 1<<30 { // RLIM_INFINITY or as good as
		return 0, nil
	}
	return max(0, int(rl.Max)-margin), nil
}

// measureScale runs one probed with n targets through registration, a
// window, listing, a restart and another window.
func measureScale(ctx context.Context, cfg scaleConfig, dataDir string, n int, ports []int, stderr io.Writer) (scaleReport, error) {
	limit, err := keepAliveLimit(cfg.fdMargin)
	if err != nil {
		return scaleReport{}, err
	}
	r := scaleReport{Targets: n, PeriodMs: ms(cfg.period), Mix: newScaleMix(n, cfg.httpShare, cfg.keepAliveShare, limit), Workers: cfg.workers}
	r.LoadAverage[0] = loadAverage()
	if r.Mix.KeepAliveLimit > 0 {
		fmt.Fprintf(stderr, "scale: the file descriptor limit (ulimit -Hn) allows %d kept-alive connections: %d targets keep theirs alive instead of %d\n",
			limit, r.Mix.HTTPKeepAlive, newScaleMix(n, cfg.httpShare, cfg.keepAliveShare, 0).HTTPKeepAlive)
	}
	opts := probedOptions{bin: cfg.probedBin, dataDir: dataDir, minPeriod: min(cfg.period, 100*time.Millisecond)}
	known, err := probedFlags(ctx, cfg.probedBin)
	if err != nil {
		return scaleReport{}, err
	}
	if known["max-targets"] {
		opts.extra = append(opts.extra, "--max-targets=0")
	}
	if cfg.heapProfile != "" {
		if !known["pprof"] {
			return scaleReport{}, fmt.Errorf("--heap-profile: %s has no --pprof flag", cfg.probedBin)
		}
		opts.extra = append(opts.extra, "--pprof")
	}

	fmt.Fprintf(stderr, "scale: %d targets (%d HTTP kept alive, %d HTTP new connection, %d TCP) every %v\n",
		n, r.Mix.HTTPKeepAlive, r.Mix.HTTPNewConnection, r.Mix.TCP, cfg.period)
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
	if r.BaseRSSBytes, err = procRSS(p.pid()); err != nil {
		return scaleReport{}, err
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
	if r.List, err = listEvery(ctx, p.client); err != nil {
		return scaleReport{}, err
	}
	if r.List.Targets != n {
		return scaleReport{}, fmt.Errorf("ListTargets returned %d targets over %d pages, want %d", r.List.Targets, r.List.Pages, n)
	}
	fmt.Fprintf(stderr, "scale: listed %d targets in %d pages in %.2fs\n", n, r.List.Pages, r.List.Seconds)
	if cfg.heapProfile != "" {
		path := numberedPath(cfg.heapProfile, n)
		if err := p.saveHeapProfile(ctx, path); err != nil {
			return scaleReport{}, err
		}
		fmt.Fprintf(stderr, "scale: heap profile in %s\n", path)
	}

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

// scaleTarget is target i of mix: one readiness probe of 127.0.0.1:port
// every period.
func scaleTarget(i int, mix scaleMix, port int, period time.Duration) *probev1.Target {
	name := fmt.Sprintf("scale-%06d", i)
	http, keepAlive := mix.kind(i)
	if http {
		return httpTarget(name, port, period, !keepAlive)
	}
	p := &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: int32(port)}}}
	p.PeriodSeconds, p.PeriodMilliseconds = probeDuration(period)
	return &probev1.Target{Name: name, ReadinessProbe: p}
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
	if s.RSSBytes, s.RSSAnonBytes, s.RSSFileBytes, err = procRSSParts(p.pid()); err != nil {
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

// numberedPath inserts n before the extension of path: heap.pb.gz, 1000
// -> heap-1000.pb.gz.
func numberedPath(path string, n int) string {
	dir, base := filepath.Split(path)
	name, ext, _ := strings.Cut(base, ".")
	if ext != "" {
		ext = "." + ext
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d%s", name, n, ext))
}

// readScaleReports reads the reports of an earlier run: the JSON the
// command prints last (one object or an array), possibly after its tables.
func readScaleReports(path string) ([]scaleReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	line := lastLine(b)
	var many []scaleReport
	if err := json.Unmarshal(line, &many); err == nil {
		return many, nil
	}
	var one scaleReport
	if err := json.Unmarshal(line, &one); err != nil {
		return nil, fmt.Errorf("%s: the last line is not a scale report: %w", path, err)
	}
	return []scaleReport{one}, nil
}

// findScaleReport returns the report of n targets in rs, or nil.
func findScaleReport(rs []scaleReport, n int) *scaleReport {
	for i := range rs {
		if rs[i].Targets == n {
			return &rs[i]
		}
	}
	return nil
}

// printScaleTable prints one report, beside the earlier one if any.
func printScaleTable(w io.Writer, cfg scaleConfig, r scaleReport, before *scaleReport) error {
	fmt.Fprintf(w, "scale: %d targets (%d HTTP kept alive, %d HTTP new connection, %d TCP) every %v, GOMAXPROCS %d, load average %.1f → %.1f\n\n",
		r.Targets, r.Mix.HTTPKeepAlive, r.Mix.HTTPNewConnection, r.Mix.TCP, cfg.period, runtime.GOMAXPROCS(0), r.LoadAverage[0], r.LoadAverage[1])
	kib := func(b float64) float64 { return b / 1024 }
	rows := []struct {
		name string
		get  func(scaleReport) float64
		prec int
	}{
		{"registrations/s", func(r scaleReport) float64 { return r.RegistrationsPerSecond }, 0},
		{"empty server RSS MiB", func(r scaleReport) float64 { return mib(r.BaseRSSBytes) }, 1},
		{"RSS MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSBytes) }, 1},
		{"RSS KiB per target", func(r scaleReport) float64 { return kib(r.Fresh.RSSBytesPerTarget) }, 2},
		{"  anonymous MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSAnonBytes) }, 1},
		{"  mapped files MiB", func(r scaleReport) float64 { return mib(r.Fresh.RSSFileBytes) }, 1},
		{"peak RSS MiB", func(r scaleReport) float64 { return mib(r.Fresh.PeakRSSBytes) }, 1},
		{"heap in use MiB", func(r scaleReport) float64 { return mib(r.Fresh.HeapInuseBytes) }, 1},
		{"stacks MiB", func(r scaleReport) float64 { return mib(r.Fresh.StackInuseBytes) }, 1},
		{"goroutines", func(r scaleReport) float64 { return float64(r.Fresh.Goroutines) }, 0},
		{"probes in flight", func(r scaleReport) float64 { return float64(r.Fresh.ProbesInflight) }, 0},
		{"probes/s", func(r scaleReport) float64 { return r.Fresh.ProbesPerSecond }, 0},
		{"probes failed", func(r scaleReport) float64 { return float64(r.Fresh.ProbesFailed) }, 0},
		{"CPU µs per probe", func(r scaleReport) float64 { return r.Fresh.CPUUsPerProbe }, 1},
		{"list all s", func(r scaleReport) float64 { return r.List.Seconds }, 3},
		{"list first page ms", func(r scaleReport) float64 { return r.List.FirstPageMs }, 1},
		{"stop s", func(r scaleReport) float64 { return r.StopSeconds }, 3},
		{"restart to serving s", func(r scaleReport) float64 { return r.RestartSeconds }, 3},
		{"after restart: RSS MiB", func(r scaleReport) float64 { return mib(r.Restarted.RSSBytes) }, 1},
		{"after restart: KiB per target", func(r scaleReport) float64 { return kib(r.Restarted.RSSBytesPerTarget) }, 2},
		{"after restart: mapped files MiB", func(r scaleReport) float64 { return mib(r.Restarted.RSSFileBytes) }, 1},
		{"after restart: goroutines", func(r scaleReport) float64 { return float64(r.Restarted.Goroutines) }, 0},
		{"after restart: probes/s", func(r scaleReport) float64 { return r.Restarted.ProbesPerSecond }, 0},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if before != nil {
		fmt.Fprintf(tw, "%-32s\tthis run\t--compare\tratio\t\n", "")
	}
	for _, row := range rows {
		v := row.get(r)
		if before == nil {
			fmt.Fprintf(tw, "%-32s\t%s\t\n", row.name, f(v, row.prec))
			continue
		}
		b := row.get(*before)
		fmt.Fprintf(tw, "%-32s\t%s\t%s\t%s\t\n", row.name, f(v, row.prec), f(b, row.prec), f(ratio(v, b), 2)+"x")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// scaleCharts plots RSS and goroutines against the number of targets.
// The period and the mix in the title are the first report's.
func scaleCharts(reports []scaleReport) []chart {
	rss := []chartSeries{{name: "fresh (after registration)"}, {name: "after a restart"}, {name: "goal: empty server + 3 KB per target", dashed: true}}
	gor := []chartSeries{{name: "fresh (after registration)"}, {name: "after a restart"}, {name: "goal: 4 × GOMAXPROCS + probes in flight", dashed: true}}
	for _, r := range reports {
		x := float64(r.Targets)
		rss[0].points = append(rss[0].points, point{x, mib(r.Fresh.RSSBytes)})
		rss[1].points = append(rss[1].points, point{x, mib(r.Restarted.RSSBytes)})
		rss[2].points = append(rss[2].points, point{x, mib(r.BaseRSSBytes + int64(r.Targets)*3000)})
		gor[0].points = append(gor[0].points, point{x, float64(r.Fresh.Goroutines)})
		gor[1].points = append(gor[1].points, point{x, float64(r.Restarted.Goroutines)})
		gor[2].points = append(gor[2].points, point{x, float64(4*runtime.GOMAXPROCS(0) + r.Fresh.ProbesInflight)})
	}
	xLabel := "targets"
	for _, r := range reports {
		if r.Mix.KeepAliveLimit > 0 {
			xLabel = fmt.Sprintf("targets (at %d, %d kept alive: the file descriptor limit)", r.Targets, r.Mix.HTTPKeepAlive)
		}
	}
	mixNote := ""
	if len(reports) > 0 {
		r := reports[0]
		m := r.Mix
		http := m.HTTPKeepAlive + m.HTTPNewConnection
		mixNote = fmt.Sprintf(" (probe every %v, %.0f%% HTTP (%.0f%% of those kept alive), the rest TCP)",
			time.Duration(r.PeriodMs*float64(time.Millisecond)), 100*ratio(float64(http), float64(r.Targets)), 100*ratio(float64(m.HTTPKeepAlive), float64(http)))
	}
	return []chart{
		{title: "probed RSS against targets" + mixNote, xLabel: xLabel, yLabel: "RSS MiB", logX: true, marks: true, series: rss},
		{title: "probed goroutines against targets", xLabel: xLabel, yLabel: "goroutines", logX: true, marks: true, series: gor},
	}
}
