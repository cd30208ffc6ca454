package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/probedproc"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// coldLabel marks the targets of the coldstart benchmark.
var coldLabel = map[string]string{"probed-bench": "coldstart"}

// coldConfig is the workload of the coldstart benchmark.
type coldConfig struct {
	runs       int
	startDelay time.Duration
	period     time.Duration
	compare    []time.Duration
	probedBin  string
	svg        string
	dataDir    string // parent of probed's data directory; "" for the temporary directory
}

func (c *coldConfig) register(fs *flag.FlagSet) {
	fs.IntVar(&c.runs, "runs", 30, "cold starts per period")
	fs.DurationVar(&c.startDelay, "start-delay", 300*time.Millisecond, "time from registration to the pod listening (plus a random fraction of the period)")
	fs.DurationVar(&c.period, "period", 50*time.Millisecond, "probe period under test")
	c.compare = []time.Duration{200 * time.Millisecond, time.Second}
	fs.Func("compare", "periods measured in the same run for comparison (default 200ms,1s: Knative's activator, kubelet's best)", func(s string) error {
		c.compare = c.compare[:0]
		for f := range strings.SplitSeq(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			c.compare = append(c.compare, d)
		}
		return nil
	})
	fs.StringVar(&c.probedBin, "probed-bin", "", "probed binary to run (default: cmd/probed of this repository, built into a temporary directory)")
	fs.StringVar(&c.svg, "svg", "", "write the latency distributions (SVG) to this file")
	fs.StringVar(&c.dataDir, "data-dir", "", "where probed keeps its store (default: a temporary directory); /dev/shm takes the disk's fsync out of the figures")
}

// periods returns the periods to measure: --period first, then the
// others, without repeats.
func (c *coldConfig) periods() []time.Duration {
	out := []time.Duration{c.period}
	for _, p := range c.compare {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (c *coldConfig) validate() error {
	if c.runs < 1 {
		return fmt.Errorf("--runs must be positive, got %d", c.runs)
	}
	if c.startDelay < 0 {
		return fmt.Errorf("--start-delay must not be negative")
	}
	for _, p := range c.periods() {
		if p < time.Millisecond || p%time.Millisecond != 0 {
			return fmt.Errorf("period %v: must be a whole number of milliseconds, at least 1ms", p)
		}
	}
	return nil
}

// coldReport is the result of the coldstart benchmark, keyed by period
// ("50ms", "200ms", "1s").
type coldReport struct {
	Runs         int     `json:"runs"`
	StartDelayMs float64 `json:"start_delay_ms"`
	// PeriodsMs lists the periods measured, the one under test first.
	PeriodsMs []float64 `json:"periods_ms"`
	// DetectMs: from the pod's first 200 answer to a probe to the ready
	// event arriving at a Watch client.
	DetectMs map[string]latency `json:"detect_ms"`
	// ColdStartMs: from the pod starting to listen (able to answer) to
	// the ready event at the Watch client: what a request held by an
	// activator waits beyond the pod's own start.
	ColdStartMs map[string]latency `json:"cold_start_ms"`
	Ratio       coldRatio          `json:"ratio"`
	// StoreCommitMs is the duration of probed's store transactions over
	// the whole run (each ready event waits for one): p50 and p99 are
	// bucket upper bounds (0.5 ms to 2.5 s; -1 means above), mean is
	// exact. Absent when probed has no metrics.
	StoreCommitMs *bucketLatency `json:"store_commit_ms,omitempty"`
}

// coldRatio compares the period under test with a 1 s period.
type coldRatio struct {
	// VsOneSecondP50: median cold start with a 1 s period / with the
	// period under test.
	VsOneSecondP50 float64 `json:"vs_1s_p50"`
	// DetectVsOneSecondP50: the same for the detection latency alone.
	DetectVsOneSecondP50 float64 `json:"detect_vs_1s_p50"`
}

// coldSamples are the measurements of one period.
type coldSamples struct {
	period        time.Duration
	detect, start []time.Duration
}

// newColdReport summarises the samples.
func newColdReport(cfg coldConfig, samples []coldSamples) coldReport {
	r := coldReport{
		Runs:         cfg.runs,
		StartDelayMs: ms(cfg.startDelay),
		DetectMs:     map[string]latency{},
		ColdStartMs:  map[string]latency{},
	}
	for _, s := range samples {
		r.PeriodsMs = append(r.PeriodsMs, ms(s.period))
		r.DetectMs[s.period.String()] = percentiles(s.detect)
		r.ColdStartMs[s.period.String()] = percentiles(s.start)
	}
	under, second := cfg.period.String(), time.Second.String()
	if _, ok := r.ColdStartMs[second]; ok {
		r.Ratio.VsOneSecondP50 = ratio(r.ColdStartMs[second].P50, r.ColdStartMs[under].P50)
		r.Ratio.DetectVsOneSecondP50 = ratio(r.DetectMs[second].P50, r.DetectMs[under].P50)
	}
	return r
}

// percentiles returns the exact nearest-rank p50, p90, p99 and max of ds, in
// milliseconds (zeros when ds is empty).
func percentiles(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(float64(len(s))*q+0.999999999) - 1 // ceil(q·n) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return latency{P50: ms(rank(0.50)), P90: ms(rank(0.90)), P99: ms(rank(0.99)), Max: ms(s[len(s)-1])}
}

// runColdStart is the coldstart subcommand.
func runColdStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("coldstart", stderr, "also print the result as one JSON object on the last line",
		"Runs a real probed (a child process). Each run registers a target with a",
		"Knative-style readiness probe (GET /healthz, K-Network-Probe: queue), starts a pod",
		"listening after --start-delay plus a random fraction of the period, and measures",
		"when the ready event reaches a Watch client: after the pod's first 200 answer",
		"(detect) and after the pod started listening (cold start). Runs alternate periods.")
	var cfg coldConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	dir, stderr, cleanup, err := childRun(ctx, "coldstart", &cfg.probedBin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	periods := cfg.periods()
	dataDir := filepath.Join(dir, "data")
	if cfg.dataDir != "" {
		if dataDir, err = os.MkdirTemp(cfg.dataDir, "probed-bench-coldstart-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dataDir) }()
	}
	p, err := startProbed(ctx, probedOptions{bin: cfg.probedBin, dataDir: dataDir, minPeriod: slices.Min(periods)}, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()

	samples, err := measureColdStarts(ctx, cfg, p.client, stderr)
	if err != nil {
		return err
	}
	report := newColdReport(cfg, samples)
	if ss, err := p.scrape(ctx); err == nil {
		if h, err := promHistogram(ss, metricCommit); err == nil {
			report.StoreCommitMs = summarizeLateness(h)
		}
	}
	if err := printColdTable(stdout, cfg, report); err != nil {
		return err
	}
	if cfg.svg != "" {
		if err := writeFile(cfg.svg, coldChart(cfg, samples).writeSVG); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSONLine(stdout, report)
	}
	return nil
}

// measureColdStarts runs cfg.runs cold starts per period, alternating
// the periods so that they share the machine's conditions.
func measureColdStarts(ctx context.Context, cfg coldConfig, c *client.Client, stderr io.Writer) ([]coldSamples, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newReadyWatcher()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	synced := make(chan struct{})
	wg.Go(func() { w.run(ctx, c, synced) })
	select {
	case <-synced:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	periods := cfg.periods()
	samples := make([]coldSamples, len(periods))
	for i, p := range periods {
		samples[i].period = p
	}
	for run := range cfg.runs {
		for i, p := range periods {
			name := fmt.Sprintf("cold-%d-%d", p.Milliseconds(), run)
			detect, start, err := coldStart(ctx, c, w, name, p, cfg.startDelay)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			samples[i].detect = append(samples[i].detect, detect)
			samples[i].start = append(samples[i].start, start)
		}
		if (run+1)%10 == 0 || run+1 == cfg.runs {
			fmt.Fprintf(stderr, "coldstart: %d/%d runs per period done\n", run+1, cfg.runs)
		}
	}
	return samples, nil
}

// coldStart measures one cold start: it registers the target, starts the
// pod after delay (plus a random fraction of the period, so that the
// start falls anywhere on the probe grid), and waits for the ready event.
func coldStart(ctx context.Context, c *client.Client, w *readyWatcher, name string, period, delay time.Duration) (detect, start time.Duration, err error) {
	addr, err := probedproc.FreeAddr()
	if err != nil {
		return 0, 0, err
	}
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	ready := w.expect(name)
	defer w.forget(name)
	if _, err := c.Create(ctx, knativeTarget(name, tcpAddr, period)); err != nil {
		return 0, 0, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, derr := c.Delete(dctx, name); derr != nil && !errors.Is(derr, client.ErrNotFound) && err == nil {
			err = derr
		}
	}()
	if err := sleep(ctx, delay+rand.N(period)); err != nil {
		return 0, 0, err
	}
	var pod coldPod
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	listening := time.Now()
	srv := &http.Server{Handler: &pod, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	defer func() { _ = srv.Close() }()
	limit := time.NewTimer(3*period + 10*time.Second)
	defer limit.Stop()
	select {
	case at := <-ready:
		first := pod.firstReady()
		if first.IsZero() {
			return 0, 0, errors.New("ready event before the pod answered a probe 200")
		}
		return at.Sub(first), at.Sub(listening), nil
	case <-limit.C:
		return 0, 0, fmt.Errorf("no ready event within %v of the pod listening", 3*period+10*time.Second)
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
}

// knativeTarget is a target with the Knative activator's readiness probe
// of addr every period.
func knativeTarget(name string, addr *net.TCPAddr, period time.Duration) *probev1.Target {
	p := &probev1.Probe{Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
		Host: addr.IP.String(), Port: int32(addr.Port), Path: "/healthz",
		HttpHeaders:  []*probev1.HTTPHeader{{Name: "K-Network-Probe", Value: "queue"}},
		ExpectedBody: "queue",
	}}}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(period)
	return &probev1.Target{Name: name, Labels: coldLabel, ReadinessProbe: p}
}

// coldPod answers Knative's probe with 200 "queue" and records when it
// first did.
type coldPod struct {
	first atomic.Int64 // unix ns of the first 200 answer; 0 before
}

func (p *coldPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("K-Network-Probe") != "queue" {
		http.NotFound(w, r)
		return
	}
	p.first.CompareAndSwap(0, time.Now().UnixNano())
	_, _ = io.WriteString(w, "queue")
}

func (p *coldPod) firstReady() time.Time {
	ns := p.first.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// readyWatcher follows the benchmark's targets with one Watch and hands
// the arrival time of each target's ready event to whoever expects it.
type readyWatcher struct {
	mu      sync.Mutex // guards waiting
	waiting map[string]chan time.Time
}

func newReadyWatcher() *readyWatcher {
	return &readyWatcher{waiting: map[string]chan time.Time{}}
}

// expect returns the channel that receives the arrival time of name's
// first ready event.
func (w *readyWatcher) expect(name string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.waiting[name] = ch
	w.mu.Unlock()
	return ch
}

func (w *readyWatcher) forget(name string) {
	w.mu.Lock()
	delete(w.waiting, name)
	w.mu.Unlock()
}

// run watches until ctx is done; synced is closed once the initial
// snapshot is complete.
func (w *readyWatcher) run(ctx context.Context, c *client.Client, synced chan<- struct{}) {
	once := sync.OnceFunc(func() { close(synced) })
	for resp := range c.Watch(ctx, client.WithLabels(coldLabel), client.WithKinds(probev1.EventKind_EVENT_KIND_TRANSITION)) {
		at := time.Now()
		for _, ev := range resp.Events {
			if ev.GetKind() != probev1.EventKind_EVENT_KIND_TRANSITION || !ev.GetReady() {
				continue
			}
			w.mu.Lock()
			ch := w.waiting[ev.GetName()]
			delete(w.waiting, ev.GetName())
			w.mu.Unlock()
			if ch != nil {
				ch <- at
			}
		}
		if resp.SnapshotComplete {
			once()
		}
	}
}

// printColdTable prints the report.
func printColdTable(w io.Writer, cfg coldConfig, r coldReport) error {
	fmt.Fprintf(w, "coldstart: %d runs per period, pod listening %v after registration (+ a random fraction of the period), GOMAXPROCS %d\n\n",
		cfg.runs, cfg.startDelay, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "period\tdetect p50 ms\tdetect p99 ms\tdetect max ms\tcold start p50 ms\tcold start p99 ms\tcold start max ms\t\n")
	for _, p := range cfg.periods() {
		dl, cs := r.DetectMs[p.String()], r.ColdStartMs[p.String()]
		fmt.Fprintf(tw, "%v\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p, f(dl.P50, 2), f(dl.P99, 2), f(dl.Max, 2), f(cs.P50, 1), f(cs.P99, 1), f(cs.Max, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndetect: first 200 answer -> ready event at a Watch client; cold start: pod listening -> the same event.\n"+
		"median cold start, 1s period / %v period: %.1fx\n", cfg.period, r.Ratio.VsOneSecondP50)
	if c := r.StoreCommitMs; c != nil {
		p99 := f(c.P99, 1)
		if c.P99 < 0 {
			p99 = ">2500"
		}
		fmt.Fprintf(w, "store commits (each ready event waits for one): p50 <= %s ms, p99 <= %s ms, mean %s ms\n", f(c.P50, 1), p99, f(c.Mean, 2))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// coldChart plots the distribution (CDF) of both latencies per period.
func coldChart(cfg coldConfig, samples []coldSamples) chart {
	var series []chartSeries
	cdf := func(ds []time.Duration) []point {
		s := slices.Clone(ds)
		slices.Sort(s)
		pts := make([]point, len(s))
		for i, d := range s {
			pts[i] = point{x: max(ms(d), 0.01), y: 100 * float64(i+1) / float64(len(s))}
		}
		return pts
	}
	for i, s := range samples {
		series = append(series, chartSeries{name: fmt.Sprintf("period %v: pod listening → ready event (cold start)", s.period),
			color: palette[i%len(palette)], points: cdf(s.start)})
	}
	for i, s := range samples {
		series = append(series, chartSeries{name: fmt.Sprintf("period %v: first 200 answer → ready event (detect)", s.period),
			color: palette[i%len(palette)], dashed: true, points: cdf(s.detect)})
	}
	return chart{
		title:  fmt.Sprintf("Readiness detection on loopback, %d cold starts per period (%d cores)", cfg.runs, runtime.NumCPU()),
		xLabel: "milliseconds (log scale)",
		yLabel: "% of cold starts (CDF)",
		logX:   true,
		step:   true,
		yMax:   100,
		series: series,
	}
}
