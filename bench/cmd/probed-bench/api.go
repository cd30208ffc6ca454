package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// apiConfig is the api subcommand's flags.
type apiConfig struct {
	targets     []int
	bins        []string
	ghz         string
	concurrency int
	duration    time.Duration
	rounds      int
	calls       []string
	workers     int
	cpuProfile  string
	together    bool
}

// The calls the api benchmark makes.
const (
	apiGet    = "get"
	apiList   = "list"
	apiCreate = "create"
	// apiHealth is grpc.health.v1's Check of the server: a call through
	// the same server path (transport, interceptors, codec) whose handler
	// does nearly nothing, the floor under the other calls.
	apiHealth = "health"
)

func (c *apiConfig) register(fs *flag.FlagSet) {
	fs.Func("targets", "targets registered before the calls, comma-separated (one run per count; default 2000,20000)", func(s string) error {
		n, err := parseCounts(s)
		c.targets = n
		return err
	})
	fs.Func("probed-bin", "probed binaries to compare, comma-separated, alternated in each round (default: cmd/probed of this repository, built)", func(s string) error {
		c.bins = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&c.ghz, "ghz", "ghz", "the ghz binary (v0.121.0: go install github.com/bojand/ghz/cmd/ghz@v0.121.0)")
	fs.IntVar(&c.concurrency, "concurrency", 50, "concurrent calls (ghz -c)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long ghz calls each method (ghz -z)")
	fs.IntVar(&c.rounds, "rounds", 1, "runs of each binary, alternated")
	fs.Func("calls", "methods to call, in this order, comma-separated: get, list, create, health (grpc.health.v1 Check: the server path's floor) (default get, list, create)", func(s string) error {
		c.calls = strings.Split(s, ",")
		return nil
	})
	fs.IntVar(&c.workers, "workers", 64, "concurrent CreateTarget calls while registering")
	fs.BoolVar(&c.together, "together", false, "run the binaries at once, each called by its own ghz over the same seconds (on a shared machine the load moves by tens of percent from minute to minute; at once, every binary sees the same)")
	fs.StringVar(&c.cpuProfile, "cpu-profile", "", "save a CPU profile of probed during each method's calls (its duration less a second) to this file, with the binary's index, the targets, the method and the round inserted before the extension (needs a probed with --pprof)")
}

func (c *apiConfig) validate() error {
	if len(c.targets) == 0 {
		c.targets = []int{2000, 20000}
	}
	if len(c.calls) == 0 {
		c.calls = []string{apiGet, apiList, apiCreate}
	}
	for _, call := range c.calls {
		switch call {
		case apiGet, apiList, apiCreate, apiHealth:
		default:
			return fmt.Errorf("--calls: unknown method %q (get, list, create or health)", call)
		}
	}
	switch {
	case c.concurrency < 1, c.rounds < 1, c.workers < 1:
		return errors.New("--concurrency, --rounds and --workers must be positive")
	case c.duration < 2*time.Second:
		return errors.New("--duration must be at least 2s")
	}
	for _, n := range c.targets {
		if n < 200 {
			return errors.New("--targets must be at least 200 (a page of 100 from the middle)")
		}
	}
	return nil
}

// parseCounts parses comma-separated positive integers.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// apiRun is one binary's calls of one method.
type apiRun struct {
	Bin     string `json:"bin"`
	Targets int    `json:"targets"`
	Method  string `json:"method"`
	Round   int    `json:"round"`
	Calls   int64  `json:"calls"`  // answered OK
	Errors  int64  `json:"errors"` // the calls cancelled when ghz stopped
	// CPUUsPerCall is probed's CPU time (user + system, /proc/PID/stat)
	// over the calls, divided by the calls: what the load generator,
	// sharing the machine, does not move.
	CPUUsPerCall   float64 `json:"cpu_us_per_call"`
	CallsPerSecond float64 `json:"calls_per_second"`
	// MeanMs and P99Ms are ghz's latencies.
	MeanMs float64 `json:"mean_ms"`
	P99Ms  float64 `json:"p99_ms"`
	// IdleCPUUsPerSecond is probed's CPU per second with no call, just
	// before (its targets do not probe during the run: see the command's
	// help): what the figure above includes that is not the calls'.
	IdleCPUUsPerSecond float64 `json:"idle_cpu_us_per_second"`
	LoadAverage        float64 `json:"load_average"`
}

// apiReport is the api subcommand's JSON.
type apiReport struct {
	Concurrency int      `json:"concurrency"`
	DurationMs  float64  `json:"duration_ms"`
	Runs        []apiRun `json:"runs"`
}

// runAPI is the api subcommand.
func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("api", stderr, "also print the result as JSON on the last line",
		"The cost of the API per call: a real probed (bbolt store in a temporary directory) with",
		"N targets (one TCP readiness probe each, with an initial delay of an hour, so that no",
		"probe runs during the calls), called by ghz (-c concurrency, -z duration) for each",
		"method: GetTarget of a random registered target, ListTargets of a page of 100 from the",
		"middle of the registry, CreateTarget of a new target like them (and on request the",
		"grpc.health.v1 Check, the server path's floor under them). Reports probed's own",
		"CPU per call (/proc/PID/stat over the calls: the load generator shares the machine),",
		"calls/s and ghz's latencies; binaries alternated, each on a fresh data directory.")
	var cfg apiConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	if _, err := exec.LookPath(cfg.ghz); err != nil {
		return fmt.Errorf("--ghz: %w", err)
	}
	dir, stderr, cleanup, err := childRunBins(ctx, "api", &cfg.bins, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	r := apiReport{Concurrency: cfg.concurrency, DurationMs: ms(cfg.duration)}
	for _, n := range cfg.targets {
		for round := 1; round <= cfg.rounds; round++ {
			groups := [][]int{}
			if cfg.together {
				groups = append(groups, nil)
				for i := range cfg.bins {
					groups[0] = append(groups[0], i)
				}
			} else {
				for i := range cfg.bins {
					groups = append(groups, []int{i})
				}
			}
			for _, g := range groups {
				runs, err := apiOnce(ctx, cfg, g, n, round, dir, stderr)
				if err != nil {
					return fmt.Errorf("%d targets, round %d: %w", n, round, err)
				}
				r.Runs = append(r.Runs, runs...)
			}
		}
	}
	if err := printAPI(stdout, r); err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLine(stdout, r)
	}
	return nil
}

// apiTarget is the i-th target the api benchmark registers.
func apiTarget(i int) *probev1.Target {
	return &probev1.Target{Name: fmt.Sprintf("api-%06d", i), Labels: map[string]string{"app": "api-bench"}, ReadinessProbe: &probev1.Probe{
		Handler:             &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
		InitialDelaySeconds: 3600, PeriodSeconds: 10,
	}}
}

// apiOnce runs the binaries of cfg.bins at indexes (each with n targets
// on a fresh data directory under dir, at once) and calls each method of
// all of them at once, each with its own ghz.
func apiOnce(ctx context.Context, cfg apiConfig, indexes []int, n, round int, dir string, stderr io.Writer) ([]apiRun, error) {
	procs := make([]*probedProc, len(indexes))
	defer func() {
		for _, p := range procs {
			if p != nil {
				_ = p.stop()
			}
		}
	}()
	for k, i := range indexes {
		dataDir := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
		opts := probedOptions{bin: cfg.bins[i], dataDir: dataDir, extra: []string{"--max-targets=0"}}
		if cfg.cpuProfile != "" {
			opts.extra = append(opts.extra, "--pprof")
		}
		p, err := startProbed(ctx, opts, stderr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.bins[i], err)
		}
		procs[k] = p
		fmt.Fprintf(stderr, "api: %s: registering %d targets\n", cfg.bins[i], n)
		if err := registerAll(ctx, p.client, n, cfg.workers, apiTarget); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.bins[i], err)
		}
	}
	// A page of 100 from the middle of the registry (names sort as their
	// numbers): the token ListTargets returns after the target before it.
	token := base64.RawURLEncoding.EncodeToString([]byte("after:" + apiTarget(n/2-1).GetName()))
	data := map[string]string{
		apiGet:    fmt.Sprintf("{\"name\":\"api-{{printf `%%06d` (randomInt 0 %d)}}\"}", n), // a Go template: ghz fills it per call
		apiList:   fmt.Sprintf(`{"pageSize":100,"pageToken":%q}`, token),
		apiCreate: `{"target":{"name":"new-{{.WorkerID}}-{{.RequestNumber}}","labels":{"app":"api-bench"},"readinessProbe":{"tcpSocket":{"host":"127.0.0.1","port":1},"initialDelaySeconds":3600,"periodSeconds":10}}}`,
		apiHealth: `{"service":""}`,
	}
	methods := map[string]string{apiGet: "probe.v1.ProbeService/GetTarget", apiList: "probe.v1.ProbeService/ListTargets",
		apiCreate: "probe.v1.ProbeService/CreateTarget", apiHealth: "grpc.health.v1.Health/Check"}
	var runs []apiRun
	for _, call := range cfg.calls {
		// The CPU each probed spends with no call: the idle baseline.
		idle := make([]time.Duration, len(procs))
		for k, p := range procs {
			c, err := p.cpu()
			if err != nil {
				return nil, err
			}
			idle[k] = c
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return nil, err
		}
		results := make([]apiRun, len(procs))
		errs := make(chan error, len(procs))
		for k, p := range procs {
			c, err := p.cpu()
			if err != nil {
				return nil, err
			}
			results[k] = apiRun{Bin: cfg.bins[indexes[k]], Targets: n, Method: call, Round: round,
				IdleCPUUsPerSecond: float64((c - idle[k]).Microseconds()) / 2, LoadAverage: loadAverage()}
		}
		for k, p := range procs {
			go func() {
				errs <- callGHZ(ctx, cfg, p, &results[k], indexes[k], methods[call], data[call])
			}()
		}
		var failed []error
		for range procs {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		if err := errors.Join(failed...); err != nil {
			return nil, err
		}
		for _, run := range results {
			fmt.Fprintf(stderr, "api: %s, %d targets, %s: %d calls, %.1f µs of probed's CPU each, %.0f/s, p99 %.1f ms (load %.1f)\n",
				run.Bin, run.Targets, call, run.Calls, run.CPUUsPerCall, run.CallsPerSecond, run.P99Ms, run.LoadAverage)
		}
		runs = append(runs, results...)
	}
	return runs, nil
}

// callGHZ calls method (its full name) of p with ghz for cfg.duration and fills in run
// (index is the binary's, for the name of the profile).
func callGHZ(ctx context.Context, cfg apiConfig, p *probedProc, run *apiRun, index int, method, data string) error {
	profile := make(chan error, 1)
	if cfg.cpuProfile != "" {
		path := numberedPath(cfg.cpuProfile, run.Targets, fmt.Sprintf("-%d-%s-%d", index, run.Method, run.Round))
		go func() {
			profile <- p.saveCPUProfile(ctx, path, cfg.duration-time.Second)
		}()
	} else {
		profile <- nil
	}
	before, err := p.cpu()
	if err != nil {
		return err
	}
	res, err := runGHZ(ctx, cfg, method, data, p.addr)
	if err != nil {
		return err
	}
	after, err := p.cpu()
	if err != nil {
		return err
	}
	if err := <-profile; err != nil {
		return err
	}
	// The calls in flight when ghz stops end cancelled: at most one per
	// concurrent caller. More is a failure.
	run.Errors = res.errors()
	run.Calls = res.Count - run.Errors
	if run.Calls == 0 || run.Errors > int64(cfg.concurrency) {
		return fmt.Errorf("%s %s: %d of %d calls failed: %v", run.Bin, method, run.Errors, res.Count, res.ErrorDist)
	}
	run.CPUUsPerCall = float64((after - before).Microseconds()) / float64(run.Calls)
	run.CallsPerSecond = res.Rps
	run.MeanMs = float64(res.Average) / 1e6
	run.P99Ms = res.p99Ms()
	return nil
}

// ghzResult is the part of ghz's JSON report the api benchmark reads.
type ghzResult struct {
	Count       int64          `json:"count"`
	Average     int64          `json:"average"` // ns
	Rps         float64        `json:"rps"`
	ErrorDist   map[string]int `json:"errorDistribution"`
	StatusCodes map[string]int `json:"statusCodeDistribution"`
	Latencies   []struct {
		Percentage int   `json:"percentage"`
		Latency    int64 `json:"latency"` // ns
	} `json:"latencyDistribution"`
}

func (r ghzResult) errors() int64 {
	var n int64
	for code, c := range r.StatusCodes {
		if code != "OK" {
			n += int64(c)
		}
	}
	return n
}

func (r ghzResult) p99Ms() float64 {
	for _, l := range r.Latencies {
		if l.Percentage == 99 {
			return float64(l.Latency) / 1e6
		}
	}
	return 0
}

// runGHZ calls method of the server at addr for cfg.duration with ghz.
func runGHZ(ctx context.Context, cfg apiConfig, method, data, addr string) (ghzResult, error) {
	cmd := exec.CommandContext(ctx, cfg.ghz, "--insecure", "--call", method, "-d", data,
		"-c", fmt.Sprint(cfg.concurrency), "-z", cfg.duration.String(), "--connections", "1",
		"-O", "json", addr)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return ghzResult{}, fmt.Errorf("ghz: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var r ghzResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return ghzResult{}, fmt.Errorf("ghz output: %w", err)
	}
	return r, nil
}

// saveCPUProfile saves a CPU profile of d (at least a second) of the
// server to path.
func (p *probedProc) saveCPUProfile(ctx context.Context, path string, d time.Duration) error {
	b, err := p.get(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds()))))
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// printAPI prints one row per run.
func printAPI(w io.Writer, r apiReport) error {
	fmt.Fprintf(w, "api: ghz -c %d for %v per method\n\n", r.Concurrency, time.Duration(r.DurationMs*float64(time.Millisecond)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "binary\ttargets\tmethod\tround\tcalls\tprobed CPU µs/call\tcalls/s\tmean ms\tp99 ms\tidle CPU µs/s\tload\t\n")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.1f\t%.0f\t%.2f\t%.2f\t%.0f\t%.1f\t\n", filepath.Base(run.Bin), run.Targets, run.Method, run.Round,
			run.Calls, run.CPUUsPerCall, run.CallsPerSecond, run.MeanMs, run.P99Ms, run.IdleCPUUsPerSecond, run.LoadAverage)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	// The median over the rounds, and the spread.
	type key struct {
		bin     string
		targets int
		method  string
	}
	var keys []key
	cpu := map[key][]float64{}
	for _, run := range r.Runs {
		k := key{run.Bin, run.Targets, run.Method}
		if _, ok := cpu[k]; !ok {
			keys = append(keys, k)
		}
		cpu[k] = append(cpu[k], run.CPUUsPerCall)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "binary\ttargets\tmethod\trounds\tprobed CPU µs/call, median\tmin\tmax\t\n")
	for _, k := range keys {
		v := slices.Sorted(slices.Values(cpu[k]))
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t\n", filepath.Base(k.bin), k.targets, k.method, len(v), median(v), v[0], v[len(v)-1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// median returns the median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
