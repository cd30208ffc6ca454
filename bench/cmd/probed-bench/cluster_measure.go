package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/procs"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// The setups the cluster benchmark compares.
const (
	setupBolt      = "bbolt, single process"
	setupOneEtcd   = "etcd, 1 replica"
	setupThreeEtcd = "etcd, 3 replicas"
)

// metricStoreChanges counts the changes probed's store committed.
const metricStoreChanges = "probed_store_changes_total"

// clusterLabel marks the benchmark's targets.
var clusterLabel = map[string]string{"probed-bench": "cluster"}

// setup is one contestant: a single bbolt probed or a cluster.
type setup struct {
	name    string
	procs   []*probedProc
	ids     []string // replica ids, "" for the single process
	cluster *probedCluster
}

// clients returns a client of every process.
func (s *setup) clients() []*client.Client {
	out := make([]*client.Client, len(s.procs))
	for i, p := range s.procs {
		out[i] = p.client
	}
	return out
}

func (s *setup) stop() {
	if s.cluster != nil {
		s.cluster.stop()
		return
	}
	for _, p := range s.procs {
		_ = p.stop()
	}
}

// start starts the setup named name (setupBolt, setupOneEtcd or
// setupThreeEtcd) for measurement what.
func (e *clusterEnv) start(ctx context.Context, name, what string, minPeriod time.Duration) (*setup, error) {
	e.logf("%s: starting %s", what, name)
	if name == setupBolt {
		p, err := e.single(ctx, what, minPeriod)
		if err != nil {
			return nil, err
		}
		return &setup{name: name, procs: []*probedProc{p}, ids: []string{""}}, nil
	}
	n := 1
	if name == setupThreeEtcd {
		n = 3
	}
	c, err := startCluster(ctx, e.clusterOptions(what, e.cfg.leaseTTL, minPeriod), n, e.stderr)
	if err != nil {
		return nil, err
	}
	return &setup{name: name, procs: c.alive(), ids: c.ids, cluster: c}, nil
}

// registerSpread creates target(0) … target(n-1) through clients, an
// equal share through each, workers calls at a time in all.
func registerSpread(ctx context.Context, clients []*client.Client, n, workers int, target func(i int) *probev1.Target) error {
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for k, c := range clients {
		from, to := n*k/len(clients), n*(k+1)/len(clients)
		wg.Go(func() {
			errs[k] = registerAll(ctx, c, to-from, max(workers/len(clients), 1), func(i int) *probev1.Target { return target(from + i) })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// clusterName is the name of target i of a measurement.
func clusterName(i int) string { return fmt.Sprintf("c-%05d", i) }

// measureRegistrations times CreateTarget of cfg.registrations targets
// against each setup.
func measureRegistrations(ctx context.Context, e *clusterEnv, r *clusterReport) error {
	n := e.cfg.registrations
	b, err := startBackend(n, backendUp)
	if err != nil {
		return err
	}
	defer func() { _ = b.close() }()
	for _, name := range []string{setupBolt, setupOneEtcd, setupThreeEtcd} {
		s, err := e.start(ctx, name, "registrations", 0)
		if err != nil {
			return err
		}
		start := time.Now()
		err = registerSpread(ctx, s.clients(), n, e.cfg.workers, func(i int) *probev1.Target {
			return b.target(clusterName(i), i, 10*time.Second, clusterLabel)
		})
		took := time.Since(start)
		s.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res := registrationResult{Setup: name, Targets: n, Workers: e.cfg.workers, Seconds: took.Seconds(), PerSecond: float64(n) / took.Seconds()}
		e.logf("registrations: %s: %d in %v (%.0f/s)", name, n, took.Round(time.Millisecond), res.PerSecond)
		r.Registrations = append(r.Registrations, res)
	}
	return nil
}

// cpuMeter reads the CPU time of the processes of a setup, of etcd and of
// the benchmark itself (which serves the targets).
type cpuMeter struct {
	procs []*probedProc
	etcd  []int // the pids of etcd's members
}

type cpuSample struct {
	at    time.Time
	procs []time.Duration
	etcd  time.Duration
	bench time.Duration
}

func (m cpuMeter) sample() (cpuSample, error) {
	s := cpuSample{at: time.Now(), procs: make([]time.Duration, len(m.procs))}
	var err error
	for i, p := range m.procs {
		if s.procs[i], err = p.cpu(); err != nil {
			return s, err
		}
	}
	for _, pid := range m.etcd {
		cpu, err := procs.CPU(pid)
		if err != nil {
			return s, err
		}
		s.etcd += cpu
	}
	u, err := ReadUsage()
	s.bench = u.CPU()
	return s, err
}

// cores returns the CPU used between a and b, in cores: of every process,
// of etcd and of the benchmark.
func cores(a, b cpuSample) (procs []float64, etcd, bench float64) {
	w := b.at.Sub(a.at).Seconds()
	for i := range a.procs {
		procs = append(procs, (b.procs[i]-a.procs[i]).Seconds()/w)
	}
	return procs, (b.etcd - a.etcd).Seconds() / w, (b.bench - a.bench).Seconds() / w
}

// countTransitions counts the TRANSITION events of the benchmark's
// targets that a Watch of c receives, until ctx is done.
func countTransitions(ctx context.Context, c *client.Client, n *atomic.Int64) {
	for resp := range c.Watch(ctx, client.WithLabels(clusterLabel), client.WithKinds(probev1.EventKind_EVENT_KIND_TRANSITION)) {
		for _, ev := range resp.Events {
			if ev.GetKind() == probev1.EventKind_EVENT_KIND_TRANSITION {
				n.Add(1)
			}
		}
	}
}

// measureTransitions runs flapping targets (every probe answers the
// opposite of the previous one, so every probe is a transition written to
// the store) and counts the transitions a Watch client receives.
func measureTransitions(ctx context.Context, e *clusterEnv, r *clusterReport) error {
	n, period := e.cfg.flapTargets, e.cfg.flapPeriod
	for _, name := range []string{setupBolt, setupOneEtcd, setupThreeEtcd} {
		res, err := e.transitions(ctx, name, n, period)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		e.logf("transitions: %s: %.0f transitions/s at the Watch client, %.0f probes/s", name, res.TransitionsPerSecond, res.ProbesPerSecond)
		r.Transitions = append(r.Transitions, res)
	}
	return nil
}

func (e *clusterEnv) transitions(ctx context.Context, name string, n int, period time.Duration) (transitionResult, error) {
	// The targets answer 200 until all are registered and probed, then
	// flap: registering while they flap would time the creates behind the
	// transitions' writes.
	b, err := startBackend(n, backendUp)
	if err != nil {
		return transitionResult{}, err
	}
	defer func() { _ = b.close() }()
	s, err := e.start(ctx, name, "transitions", period)
	if err != nil {
		return transitionResult{}, err
	}
	defer s.stop()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var events atomic.Int64
	wg.Go(func() { countTransitions(wctx, s.procs[0].client, &events) })
	if err := registerSpread(ctx, s.clients(), n, e.cfg.workers, func(i int) *probev1.Target {
		return b.target(clusterName(i), i, period, clusterLabel)
	}); err != nil {
		return transitionResult{}, err
	}
	if err := waitProbed(ctx, b, n, 2*period+10*time.Second); err != nil {
		return transitionResult{}, err
	}
	for i := range n {
		b.flip(i, backendFlap)
	}
	if err := sleep(ctx, e.cfg.warmup); err != nil {
		return transitionResult{}, err
	}
	meter := cpuMeter{procs: s.procs, etcd: e.etcd.pids()}
	st0, err := storeCounters(ctx, s.procs)
	if err != nil {
		return transitionResult{}, err
	}
	ev0 := events.Load()
	c0, err := meter.sample()
	if err != nil {
		return transitionResult{}, err
	}
	profiled := e.profileWindow(ctx, "transitions", s, e.cfg.duration)
	// Lateness is read at the middle of the window too: a second half
	// later than the first is lateness that grows.
	if err := sleep(ctx, e.cfg.duration/2); err != nil {
		return transitionResult{}, err
	}
	stMid, err := storeCounters(ctx, s.procs)
	if err != nil {
		return transitionResult{}, err
	}
	if err := sleep(ctx, e.cfg.duration-e.cfg.duration/2); err != nil {
		return transitionResult{}, err
	}
	c1, err := meter.sample()
	if err != nil {
		return transitionResult{}, err
	}
	if err := profiled(); err != nil {
		return transitionResult{}, err
	}
	ev1 := events.Load()
	st1, err := storeCounters(ctx, s.procs)
	if err != nil {
		return transitionResult{}, err
	}
	w := c1.at.Sub(c0.at).Seconds()
	res := transitionResult{Setup: name, Targets: n, PeriodMs: ms(period), OfferedPerSecond: float64(n) / period.Seconds(),
		Transitions: ev1 - ev0, TransitionsPerSecond: float64(ev1-ev0) / w, ProbesPerSecond: (st1.probes - st0.probes) / w,
		CommitsPerSecond: (st1.commits - st0.commits) / w, ChangesPerCommit: ratio(st1.changes-st0.changes, st1.commits-st0.commits)}
	for i := range s.procs {
		res.RSSGrowthMiB = append(res.RSSGrowthMiB, mib(st1.rss[i]-st0.rss[i]))
	}
	res.Lateness = latenessOf(st1.lateness.minus(st0.lateness))
	res.LatenessHalvesP99Ms = [2]float64{
		1000 * stMid.lateness.minus(st0.lateness).quantile(0.99),
		1000 * st1.lateness.minus(stMid.lateness).quantile(0.99),
	}
	res.ProcessCores, res.EtcdCores, res.BenchCores = cores(c0, c1)
	return res, nil
}

// storeTotals are counters of a setup's processes together, and the RSS
// of each.
type storeTotals struct {
	probes, commits, changes float64
	lateness                 promHist // every process's
	rss                      []int64
}

// storeCounters reads the probes run, store commits and changes so far
// from the metrics of servers, and their RSS.
func storeCounters(ctx context.Context, servers []*probedProc) (storeTotals, error) {
	var t storeTotals
	for _, p := range servers {
		ss, err := p.scrape(ctx)
		if err != nil {
			return t, err
		}
		probes, _ := promSum(ss, metricProbes)
		changes, _ := promSum(ss, metricStoreChanges)
		t.probes += probes
		t.changes += changes
		if h, err := promHistogram(ss, metricCommit); err == nil {
			t.commits += h.count
		}
		if h, err := promHistogram(ss, metricLateness); err == nil {
			t.lateness = t.lateness.plus(h)
		}
		rss, err := procs.RSS(p.Pid())
		if err != nil {
			return t, err
		}
		t.rss = append(t.rss, rss)
	}
	return t, nil
}

// measureProbeRate compares the probes/s and CPU per probe of one
// replica holding cfg.probeTargets targets with three replicas holding
// three times as many (the same load per process), with a single bbolt
// probed holding cfg.probeTargets as the baseline.
func measureProbeRate(ctx context.Context, e *clusterEnv, r *clusterReport) error {
	for _, name := range []string{setupBolt, setupOneEtcd, setupThreeEtcd} {
		res, err := e.probeRate(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		e.logf("probes: %s: %.0f probes/s of %.0f expected", name, res.ProbesPerSecond, res.ExpectedPerSecond)
		r.Probes = append(r.Probes, res)
	}
	return nil
}

func (e *clusterEnv) probeRate(ctx context.Context, name string) (probeRateResult, error) {
	period := e.cfg.probePeriod
	s, err := e.start(ctx, name, "probes", min(period, 100*time.Millisecond))
	if err != nil {
		return probeRateResult{}, err
	}
	defer s.stop()
	n := e.cfg.probeTargets * len(s.procs)
	b, err := startBackend(n, backendUp)
	if err != nil {
		return probeRateResult{}, err
	}
	defer func() { _ = b.close() }()
	if err := registerSpread(ctx, s.clients(), n, e.cfg.workers, func(i int) *probev1.Target {
		return b.target(clusterName(i), i, period, clusterLabel)
	}); err != nil {
		return probeRateResult{}, err
	}
	if err := sleep(ctx, e.cfg.warmup); err != nil {
		return probeRateResult{}, err
	}
	owned := map[string]int{}
	if s.cluster != nil {
		owners, err := s.cluster.owners(ctx, clusterLabel)
		if err != nil {
			return probeRateResult{}, err
		}
		for _, id := range owners {
			owned[id]++
		}
	} else {
		owned[""] = n
	}
	meter := cpuMeter{procs: s.procs, etcd: e.etcd.pids()}
	st0, err := storeCounters(ctx, s.procs)
	if err != nil {
		return probeRateResult{}, err
	}
	c0, err := meter.sample()
	if err != nil {
		return probeRateResult{}, err
	}
	windows := make([]e2eResult, len(s.procs))
	errs := make([]error, len(s.procs))
	var wg sync.WaitGroup
	wcfg := e2eConfig{duration: e.cfg.duration, period: period}
	profiled := e.profileWindow(ctx, "probes", s, e.cfg.duration)
	for i, p := range s.procs {
		wg.Go(func() { windows[i], errs[i] = p.measureWindow(ctx, wcfg, owned[s.ids[i]]) })
	}
	wg.Wait()
	if err := profiled(); err != nil {
		return probeRateResult{}, err
	}
	c1, err := meter.sample()
	if err != nil {
		return probeRateResult{}, err
	}
	st1, err := storeCounters(ctx, s.procs)
	if err != nil {
		return probeRateResult{}, err
	}
	res := probeRateResult{Setup: name, Replicas: len(s.procs), Targets: n, PeriodMs: ms(period), ExpectedPerSecond: float64(n) / period.Seconds(),
		Lateness: latenessOf(st1.lateness.minus(st0.lateness))}
	_, res.EtcdCores, res.BenchCores = cores(c0, c1)
	for i, w := range windows {
		if errs[i] != nil {
			return probeRateResult{}, errs[i]
		}
		res.ProbesPerSecond += w.ProbesPerSecond
		res.Processes = append(res.Processes, processRate{Replica: s.ids[i], Targets: owned[s.ids[i]], ProbesPerSecond: w.ProbesPerSecond,
			CPUUsPerProbe: w.CPUUsPerProbe, Cores: w.CPUSeconds / w.WindowSeconds, Failed: w.Failed})
	}
	return res, nil
}

// latenessOf summarizes a window's lateness histogram in milliseconds
// (each quantile is the upper bound of its bucket: 0.5, 1, 2.5, 5, 10,
// 25, 50, 100 ms, then +Inf).
func latenessOf(h promHist) lateness {
	return lateness{Fires: h.count, MeanMs: 1000 * h.mean(), P50Ms: 1000 * h.quantile(0.5), P99Ms: 1000 * h.quantile(0.99)}
}
