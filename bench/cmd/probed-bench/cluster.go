package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// clusterScenarios are the measurements of the cluster benchmark, in the
// order they run.
var clusterScenarios = []string{"registrations", "transitions", "watch", "probes", "failover"}

// clusterConfig is the workload of the cluster benchmark.
type clusterConfig struct {
	probedBin, etcdBin string
	etcdEndpoint       string // endpoints of an etcd to use instead of starting one
	etcdMembers        int    // members of the etcd the benchmark starts
	only               []string

	leaseTTL       time.Duration   // of the replicas of every measurement but failover
	leaseTTLs      []time.Duration // of the failover measurement
	kills          int
	failTargets    int
	failPeriod     time.Duration
	flapTargets    int
	flapPeriod     time.Duration
	registrations  int
	workers        int
	watchTargets   int
	watchPeriod    time.Duration
	watchFlipEvery time.Duration
	probeTargets   int // per replica
	probePeriod    time.Duration
	warmup         time.Duration
	duration       time.Duration // of each measured window
	cpuProfile     string        // prefix of the processes' CPU profiles; "" for none
}

func (c *clusterConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.probedBin, "probed-bin", "", "probed binary to run (default: cmd/probed of this repository, built into a temporary directory)")
	fs.StringVar(&c.etcdBin, "etcd-bin", "", "etcd binary to run (default: go build "+etcdPackage+" into a temporary directory)")
	fs.StringVar(&c.etcdEndpoint, "etcd-endpoints", "", "endpoints of a running etcd to use instead of starting one, as probed --etcd-endpoints takes them (its CPU is then not reported)")
	fs.IntVar(&c.etcdMembers, "etcd-members", 1, "members of the etcd cluster the benchmark starts (each on its own loopback ports; etcd's CPU is theirs together)")
	fs.Func("only", "comma-separated measurements to run (default all: "+strings.Join(clusterScenarios, ",")+")", func(s string) error {
		c.only = strings.Split(s, ",")
		for _, o := range c.only {
			if !slices.Contains(clusterScenarios, o) {
				return fmt.Errorf("unknown measurement %q", o)
			}
		}
		return nil
	})
	c.leaseTTLs = []time.Duration{2 * time.Second, 5 * time.Second}
	fs.Func("lease-ttls", "lease TTLs of the failover measurement (default 2s,5s)", func(s string) error {
		c.leaseTTLs = nil
		for f := range strings.SplitSeq(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			c.leaseTTLs = append(c.leaseTTLs, d)
		}
		return nil
	})
	fs.DurationVar(&c.leaseTTL, "lease-ttl", 2*time.Second, "lease TTL of the replicas of the measurements other than failover")
	fs.IntVar(&c.kills, "kills", 3, "SIGKILLs of a replica per lease TTL (the killed one restarts between them)")
	fs.IntVar(&c.failTargets, "failover-targets", 1000, "targets of the failover measurement")
	fs.DurationVar(&c.failPeriod, "failover-period", 500*time.Millisecond, "probe period of the failover measurement")
	fs.IntVar(&c.flapTargets, "flap-targets", 1000, "flapping targets of the transitions measurement (every probe is a transition)")
	fs.DurationVar(&c.flapPeriod, "flap-period", 100*time.Millisecond, "probe period of the flapping targets")
	fs.IntVar(&c.registrations, "registrations", 2000, "targets created in the registrations measurement")
	fs.IntVar(&c.workers, "workers", 32, "concurrent CreateTarget calls while registering")
	fs.IntVar(&c.watchTargets, "watch-targets", 50, "targets of the Watch delay measurement")
	fs.DurationVar(&c.watchPeriod, "watch-period", 100*time.Millisecond, "probe period of the Watch delay measurement")
	fs.DurationVar(&c.watchFlipEvery, "watch-flip-every", time.Second, "in the Watch delay measurement, the targets' answers flip in turn, each at most this often (a random fraction of --watch-period is added between flips)")
	fs.IntVar(&c.probeTargets, "probe-targets", 1000, "targets per replica of the probes/s measurement (one replica holds this many, three hold three times as many)")
	fs.DurationVar(&c.probePeriod, "probe-period", 200*time.Millisecond, "probe period of the probes/s measurement")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "warm-up before a measured window")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured window of the transitions, Watch delay and probes/s measurements")
	fs.StringVar(&c.cpuProfile, "cpu-profile", "", "save a CPU profile of each probed over the measured window of the probes and transitions measurements to this file, with the measurement, the setup and the replica inserted before the extension (runs probed with --pprof)")
}

func (c *clusterConfig) validate() error {
	for _, n := range []int{c.etcdMembers, c.kills, c.failTargets, c.flapTargets, c.registrations, c.workers, c.watchTargets, c.probeTargets} {
		if n < 1 {
			return fmt.Errorf("--etcd-members, --kills, --*-targets, --registrations and --workers must be positive")
		}
	}
	for _, p := range []time.Duration{c.failPeriod, c.flapPeriod, c.watchPeriod, c.probePeriod} {
		if p < time.Millisecond || p%time.Millisecond != 0 {
			return fmt.Errorf("period %v: must be a whole number of milliseconds, at least 1ms", p)
		}
	}
	for _, ttl := range append([]time.Duration{c.leaseTTL}, c.leaseTTLs...) {
		if ttl < 2*time.Second || ttl%time.Second != 0 {
			return fmt.Errorf("lease TTL %v: must be whole seconds, at least 2s", ttl)
		}
	}
	if c.duration <= 0 || c.warmup < 0 || c.watchFlipEvery < 2*c.watchPeriod {
		return fmt.Errorf("--duration must be positive, --warmup not negative, --watch-flip-every at least twice --watch-period")
	}
	return nil
}

// runs reports whether measurement name is selected.
func (c *clusterConfig) runs(name string) bool {
	return len(c.only) == 0 || slices.Contains(c.only, name)
}

// clusterEnv is what every measurement of one run shares.
type clusterEnv struct {
	cfg    clusterConfig
	dir    string
	etcd   *etcdProc
	stderr io.Writer
	seq    int // numbers the key prefixes and data directories
}

// next returns a fresh etcd key prefix and data directory.
func (e *clusterEnv) next(name string) (prefix, dir string) {
	e.seq++
	return fmt.Sprintf("/bench/%d-%s/", e.seq, name), filepath.Join(e.dir, fmt.Sprintf("%d-%s", e.seq, name))
}

// clusterOptions returns the options of a cluster under a fresh prefix.
func (e *clusterEnv) clusterOptions(name string, ttl, minPeriod time.Duration) clusterOptions {
	prefix, dir := e.next(name)
	return clusterOptions{bin: e.cfg.probedBin, dir: dir, endpoint: e.etcd.endpoint, prefix: prefix, leaseTTL: ttl, minPeriod: minPeriod,
		settle: time.Second, // measurements other than failover start from a balanced cluster sooner
		pprof:  e.cfg.cpuProfile != ""}
}

// single starts a single-node probed (bbolt store).
func (e *clusterEnv) single(ctx context.Context, name string, minPeriod time.Duration) (*probedProc, error) {
	_, dir := e.next(name)
	extra := []string{"--max-targets=0"}
	if e.cfg.cpuProfile != "" {
		extra = append(extra, "--pprof")
	}
	return startProbed(ctx, probedOptions{bin: e.cfg.probedBin, dataDir: dir, minPeriod: minPeriod, extra: extra}, e.stderr)
}

// profileWindow, with --cpu-profile, starts a CPU profile of d of each
// process of s (measurement what), and returns the function that waits
// for them.
func (e *clusterEnv) profileWindow(ctx context.Context, what string, s *setup, d time.Duration) func() error {
	if e.cfg.cpuProfile == "" {
		return func() error { return nil }
	}
	errs := make(chan error, len(s.procs))
	for i, p := range s.procs {
		name := strings.NewReplacer(" ", "", ",", "-").Replace(s.name)
		path := numberedPath(e.cfg.cpuProfile, i, "-"+what+"-"+name)
		go func() { errs <- p.saveCPUProfile(ctx, path, d) }()
	}
	return func() error {
		var all []error
		for range s.procs {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

func (e *clusterEnv) logf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "cluster: "+format+"\n", args...)
}

// runCluster is the cluster subcommand.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, asJSON := commandFlags("cluster", stderr, "also print the result as one JSON object on the last line",
		"Starts etcd (a child process, built from the Go module proxy) and probed",
		"replicas (child processes, --store=etcd) over HTTP targets the benchmark serves",
		"on loopback, and measures, next to single-node bbolt or one replica in the same",
		"run: registrations/s, transitions/s through etcd (flapping targets), Watch",
		"delay across replicas, probes/s and CPU per probe of three replicas against one,",
		"and the failover time after a SIGKILL of one of three replicas.")
	var cfg clusterConfig
	if err := parseConfig(fs, args, &cfg); err != nil {
		return err
	}
	dir, stderr, cleanup, err := childRun(ctx, "cluster", &cfg.probedBin, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	env := &clusterEnv{cfg: cfg, dir: dir, stderr: stderr, etcd: &etcdProc{endpoint: cfg.etcdEndpoint}}
	if cfg.etcdEndpoint == "" {
		if cfg.etcdBin, err = etcdBinary(ctx, cfg.etcdBin, dir, stderr); err != nil {
			return err
		}
		if env.etcd, err = startEtcd(ctx, cfg.etcdBin, dir, cfg.etcdMembers, stderr); err != nil {
			return err
		}
		defer func() { _ = env.etcd.stop() }()
	}
	r := clusterReport{GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), Started: time.Now().UTC().Format(time.RFC3339)}
	r.LoadAverage[0] = loadAverage()
	steps := []struct {
		name string
		run  func(context.Context, *clusterEnv, *clusterReport) error
	}{
		{"registrations", measureRegistrations},
		{"transitions", measureTransitions},
		{"watch", measureWatchDelay},
		{"probes", measureProbeRate},
		{"failover", measureFailover},
	}
	for _, s := range steps {
		if !cfg.runs(s.name) {
			continue
		}
		if err := s.run(ctx, env, &r); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	r.LoadAverage[1] = loadAverage()
	r.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := printClusterReport(stdout, cfg, r); err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLine(stdout, r)
	}
	return nil
}
