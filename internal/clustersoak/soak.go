// Package clustersoak is the chaos soak of cluster mode (issue 22): a
// 3-member etcd and five probed replicas, each a real process, probing
// hundreds of HTTP targets on loopback that the soak flips, with a Watch
// stream on every replica, creates and deletes through the API, a foreign
// etcd client watching its own keys, and a seeded schedule of faults:
// SIGKILL and restart of a replica, SIGSTOP of a replica for 2 × TTL, the
// etcd leader paused for 1.5 s, an etcd member killed and restarted, a
// replica added and removed. Run returns a Report: the figures, and every
// invariant that did not hold, by name (docs/cluster.md, "What the soak
// checks").
//
// The test (soak_test.go) runs a short form in `make test-cluster` and
// the full length with PROBED_SOAK=<duration> (`make soak`).
package clustersoak

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/probedproc"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Config is one soak.
type Config struct {
	// Probed is the binary BuildProbed made; Self a binary that calls
	// etcdtest.RunMemberIfAsked first (the test binary): the etcd members.
	Probed, Self string
	// Dir holds the replicas' logs and etcd's data.
	Dir string
	// Duration is the fault phase: faults in seeded order, one of each
	// kind per round, until it has passed. 0: one round (the short form).
	Duration time.Duration
	// Seed orders the faults and picks their victims, the flips and the
	// churn. The same seed gives the same schedule (not the same timing).
	Seed uint64
	// Replicas (5), Targets (flipping HTTP targets, 200), Churn (created
	// and deleted targets alive at once, at most 40).
	Replicas, Targets, Churn int
	// Period of the targets' probes (1 s) and the replicas' lease TTL
	// (2 s).
	Period, LeaseTTL time.Duration
	// Slack is added to every time bound, for a loaded machine (2 s: the
	// processes share two cores with etcd and the soak; the cluster
	// process tests of cmd/probed allow 3 s).
	Slack time.Duration
	// LogLevel is the replicas' --log-level ("info" when empty).
	LogLevel string
	// Logf reports progress.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Replicas == 0 {
		c.Replicas = 5
	}
	if c.Targets == 0 {
		c.Targets = 200
	}
	if c.Churn == 0 {
		c.Churn = 40
	}
	if c.Period == 0 {
		c.Period = time.Second
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.Slack == 0 {
		c.Slack = 2 * time.Second
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// bound is the longest a target may go unprobed: 2 × TTL + one period,
// plus the slack.
func (c *Config) bound() time.Duration { return 2*c.LeaseTTL + c.Period + c.Slack }

// flipGap is the least time between two flips of one target: more than
// the longest it may go unprobed, so that every flip is seen by a probe.
func (c *Config) flipGap() time.Duration { return c.bound() + 2*c.Period }

// The faults of the schedule.
const (
	faultKill        = "replica SIGKILL+restart"
	faultStop        = "replica SIGSTOP 2×TTL"
	faultLeaderPause = "etcd leader SIGSTOP 1.5s"
	faultMemberKill  = "etcd member SIGKILL+restart"
	faultAddRemove   = "replica added+removed"
)

var faultKinds = []string{faultKill, faultStop, faultLeaderPause, faultMemberKill, faultAddRemove}

// fault is one fault the soak caused.
type fault struct {
	kind   string
	victim string // replica id or etcd member name
	slot   int    // the replica's slot (kill, stop), else 0
	at     time.Time
}

// soak is one run.
type soak struct {
	cfg      Config
	rng      *rand.Rand
	etcd     *etcdtest.Processes
	cli      *clientv3.Client
	backend  *backend
	foreign  *foreign
	replicas []*replica // the cluster's; replicas[cfg.Replicas] is the one added and removed
	watchers []*watcher
	churn    *churner
	faults   []fault

	usageMu sync.Mutex
	usage   map[string][]usage // by process: "r3#1" (slot, start)
	starts  map[string]time.Time

	leaderPauseLosses float64
	// flipsFrom is the revision before the first flip: every target was
	// ready (its first transition) by then.
	flipsFrom uint64
}

// Run runs the soak. It fails (an error) when the cluster cannot be set
// up or does not recover from a fault; an invariant that did not hold is
// a violation in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	s := &soak{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x50a1c)), usage: map[string][]usage{}, starts: map[string]time.Time{}}
	defer s.cleanup()
	began := time.Now()
	if err := s.setup(ctx); err != nil {
		return nil, err
	}

	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(ctx)
	defer bg.Wait()
	defer stopBg()
	bg.Go(func() { s.foreign.write(bgCtx, 100*time.Millisecond) })
	bg.Go(func() { s.foreign.watch(bgCtx) })
	bg.Go(func() { s.sample(bgCtx) })
	for i := range cfg.Replicas {
		w := &watcher{home: i, replicas: s.cluster}
		s.watchers = append(s.watchers, w)
		bg.Go(func() { w.run(bgCtx) })
	}
	if err := s.createFleet(ctx); err != nil {
		return nil, err
	}

	// The load: flips and churn, through the faults.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	load.Go(func() { s.flip(loadCtx) })
	s.churn = &churner{rng: rand.New(rand.NewPCG(cfg.Seed, 0xc4)), replicas: s.cluster, spec: s.churnSpec, capacity: cfg.Churn, stored: s.stored}
	load.Go(func() { s.churn.run(loadCtx, 100*time.Millisecond) })
	phaseStart := time.Now()
	err := s.faultPhase(ctx)
	stopLoad()
	load.Wait()
	if err != nil {
		return nil, err
	}
	// Every flip seen, every view caught up.
	rep := &Report{Seed: cfg.Seed, Config: cfg, Faults: len(s.faults)}
	s.checkReadiness(ctx, rep)
	phaseEnd := time.Now()
	s.checkWatchers(ctx, rep)
	s.checkWrites(ctx, rep)
	s.checkProbes(rep, phaseStart, phaseEnd)
	s.checkUsage(rep)
	fr := s.foreign.check(ctx, 30*time.Second)
	rep.ForeignWritten, rep.ForeignSeen = fr.Written, fr.Seen
	for _, p := range fr.Problems {
		rep.violate(InvForeign, p)
	}
	rep.LeaderPauseLeaseLosses = int(s.leaderPauseLosses)
	rep.Took = time.Since(began)
	return rep, nil
}

// stored describes what etcd holds of target name's spec now.
func (s *soak) stored(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, "/probed/specs/"+name)
	switch {
	case err != nil:
		return err.Error()
	case len(resp.Kvs) == 0:
		return fmt.Sprintf("no spec at etcd revision %d", resp.Header.Revision)
	default:
		return fmt.Sprintf("its spec, created at etcd revision %d, at etcd revision %d", resp.Kvs[0].CreateRevision, resp.Header.Revision)
	}
}

// cluster is the replicas.
func (s *soak) cluster() []*replica { return s.replicas }

func (s *soak) setup(ctx context.Context) error {
	cfg := s.cfg
	cfg.Logf("soak: seed %d; %d replicas, %d targets every %v, lease TTL %v, bound %v", cfg.Seed, cfg.Replicas, cfg.Targets, cfg.Period, cfg.LeaseTTL, cfg.bound())
	var err error
	if s.etcd, err = etcdtest.StartProcesses(ctx, etcdtest.ProcessOptions{Self: cfg.Self, Dir: cfg.Dir, Members: 3, Addr: probedproc.FreeAddr}); err != nil {
		return err
	}
	if s.cli, err = etcdtest.NewClient(s.etcd.Endpoints()...); err != nil {
		return err
	}
	// The foreign client writes first: its watch starts at a revision
	// before everything probed writes.
	if s.foreign, err = startForeign(ctx, s.etcd.Endpoints()); err != nil {
		return err
	}
	if s.backend, err = startBackend(cfg.Targets); err != nil {
		return err
	}
	for slot := 1; slot <= cfg.Replicas+1; slot++ {
		r, err := s.newReplica(slot)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, r)
	}
	errs := make(chan error, cfg.Replicas)
	for _, r := range s.replicas[:cfg.Replicas] {
		go func() { errs <- s.startReplica(ctx, r) }()
	}
	for range cfg.Replicas {
		if e := <-errs; e != nil {
			err = errors.Join(err, e)
		}
	}
	if err != nil {
		return err
	}
	return s.waitBalanced(ctx, "the start")
}

func (s *soak) newReplica(slot int) (*replica, error) {
	bin, err := slotBinary(s.cfg.Probed, s.cfg.Dir, slot)
	if err != nil {
		return nil, err
	}
	addr, err := probedproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := probedproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	id := "r" + strconv.Itoa(slot)
	return &replica{slot: slot, id: id, bin: bin, addr: addr, metrics: metrics, logPath: filepath.Join(s.cfg.Dir, id+".log"),
		args: []string{"--addr=" + addr, "--metrics-addr=" + metrics, "--store=etcd",
			"--etcd-endpoints=" + strings.Join(s.etcd.Endpoints(), ","), "--etcd-prefix=/probed/",
			"--lease-ttl=" + s.cfg.LeaseTTL.String(), "--settle=" + s.cfg.LeaseTTL.String(), "--replica-id=" + id,
			"--data-dir=" + filepath.Join(s.cfg.Dir, id), "--log-level=" + cmp.Or(s.cfg.LogLevel, "info"), "--history=" + strconv.Itoa(history),
			"--registrations-per-second=0", "--max-targets=0", "--max-watchers=0", "--max-watchers-per-client=0"}}, nil
}

// history is the events each replica retains for Watch resumption
// (--history): about a minute of the soak's, so that the history is at
// its bound early and the RSS measured is flat unless something else
// grows (with the default, 100,000 events, it grows for the whole run by
// design). A watcher resumes within seconds, far inside it.
const history = 2000

// startReplica starts r and records the start of a process.
func (s *soak) startReplica(ctx context.Context, r *replica) error {
	if err := r.start(ctx); err != nil {
		return err
	}
	s.usageMu.Lock()
	s.starts[processKey(r)] = r.started
	s.usageMu.Unlock()
	return nil
}

func processKey(r *replica) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s#%d", r.id, r.restarts)
}

// waitBalanced waits until every running replica is a member owning
// shards and every shard is owned (after a fault: the cluster recovered).
func (s *soak) waitBalanced(ctx context.Context, after string) error {
	limit := 10*s.cfg.LeaseTTL + 30*time.Second
	deadline := time.Now().Add(limit)
	var last string
	for {
		var up []*replica
		for _, r := range s.replicas {
			if r.state() == running {
				up = append(up, r)
			}
		}
		ok := false
		if len(up) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := up[0].client().ListReplicas(cctx, &probev1.ListReplicasRequest{})
			cancel()
			if err != nil {
				last = err.Error()
			} else {
				owned, every := int32(0), len(resp.GetReplicas()) == len(up)
				for _, m := range resp.GetReplicas() {
					owned += m.GetShards()
					every = every && m.GetShards() > 0
				}
				ok = every && owned == resp.GetShards()
				last = fmt.Sprintf("%d members of %d replicas running, %d of %d shards owned", len(resp.GetReplicas()), len(up), owned, resp.GetShards())
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the cluster did not recover (every running replica a member owning shards, every shard owned) within %v: %s", after, limit, last)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// fleetName is fleet target i's name.
func fleetName(i int) string { return fmt.Sprintf("t-%04d", i) }

func (s *soak) fleetSpec(i int) *probev1.Target {
	p := &probev1.Probe{
		Handler:          &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: int32(s.backend.port), Path: "/t/" + strconv.Itoa(i)}},
		SuccessThreshold: 1, FailureThreshold: 1,
	}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(s.cfg.Period)
	return &probev1.Target{Name: fleetName(i), Labels: map[string]string{"soak": "fleet"}, ReadinessProbe: p}
}

func (s *soak) churnSpec(name string) *probev1.Target {
	p := &probev1.Probe{
		Handler:          &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "127.0.0.1", Port: int32(s.backend.port), Path: "/ok"}},
		SuccessThreshold: 1, FailureThreshold: 1,
	}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(s.cfg.Period)
	return &probev1.Target{Name: name, Labels: map[string]string{"soak": "churn"}, ReadinessProbe: p}
}

// createFleet creates the fleet through the replicas in turn and waits
// until every target is ready (its first probe succeeded).
func (s *soak) createFleet(ctx context.Context) error {
	ids := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range ids {
				svc := s.replicas[(i+w)%s.cfg.Replicas].client()
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := svc.CreateTarget(cctx, &probev1.CreateTargetRequest{Target: s.fleetSpec(i)})
				cancel()
				if err != nil {
					select {
					case errs <- fmt.Errorf("create %s: %w", fleetName(i), err):
					default:
					}
				}
			}
		})
	}
	for i := range s.cfg.Targets {
		ids <- i
	}
	close(ids)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ready, err := s.fleetReadiness(ctx, s.replicas[0])
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		if err == nil && n == s.cfg.Targets {
			s.cfg.Logf("soak: %d targets created and ready", n)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := s.cli.Get(cctx, "/probed/meta")
			if err != nil {
				return err
			}
			s.flipsFrom = keyspace.Position(resp.Header.Revision)
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%d of %d targets ready a minute after their creation: %w", n, s.cfg.Targets, err)
			}
			return fmt.Errorf("%d of %d targets ready a minute after their creation", n, s.cfg.Targets)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// list returns every target with label soak=kind that r holds.
func list(ctx context.Context, r *replica, kind string) ([]*probev1.Target, error) {
	svc := r.client()
	if svc == nil {
		return nil, fmt.Errorf("%s is not running", r.id)
	}
	var out []*probev1.Target
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := svc.ListTargets(cctx, &probev1.ListTargetsRequest{PageSize: 1000, PageToken: token, LabelSelector: map[string]string{"soak": kind}})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetTargets()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// fleetReadiness is the readiness of each fleet target r reports.
func (s *soak) fleetReadiness(ctx context.Context, r *replica) (map[string]bool, error) {
	ts, err := list(ctx, r, "fleet")
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ts))
	for _, t := range ts {
		out[t.GetName()] = t.GetStatus().GetReady()
	}
	return out, nil
}

// flip flips fleet targets at random, each at most once per flipGap,
// until ctx ends.
func (s *soak) flip(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0xf1))
	next := make([]time.Time, s.cfg.Targets)
	// About half the targets are between flips at any time.
	every := s.cfg.flipGap() * 2 / time.Duration(s.cfg.Targets)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			i := rng.IntN(s.cfg.Targets)
			if now.Before(next[i]) {
				continue
			}
			s.backend.flip(i)
			next[i] = now.Add(s.cfg.flipGap())
		}
	}
}

// sample records the replicas' RSS and goroutines every 2 s.
func (s *soak) sample(ctx context.Context) {
	for sleep(ctx, 2*time.Second) == nil {
		for _, r := range s.replicas {
			if r.state() != running {
				continue
			}
			key := processKey(r)
			u, err := r.sample(ctx)
			if err != nil {
				continue
			}
			s.usageMu.Lock()
			s.usage[key] = append(s.usage[key], u)
			s.usageMu.Unlock()
		}
	}
}

// faultPhase runs the schedule: rounds of one fault of each kind in a
// seeded order, until the duration has passed (one round when it is 0).
func (s *soak) faultPhase(ctx context.Context) error {
	began := time.Now()
	if err := sleep(ctx, s.cfg.LeaseTTL); err != nil { // flips before the first fault
		return err
	}
	for round := 1; ; round++ {
		kinds := append([]string(nil), faultKinds...)
		s.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, kind := range kinds {
			if err := s.inject(ctx, kind); err != nil {
				return err
			}
			if err := sleep(ctx, s.cfg.LeaseTTL); err != nil {
				return err
			}
		}
		if time.Since(began) >= s.cfg.Duration {
			s.cfg.Logf("soak: %d rounds of faults in %v", round, time.Since(began).Round(time.Second))
			return nil
		}
	}
}

// inject causes one fault and returns once the cluster has recovered.
func (s *soak) inject(ctx context.Context, kind string) error {
	ttl := s.cfg.LeaseTTL
	f := fault{kind: kind}
	switch kind {
	case faultKill:
		r := s.replicas[s.rng.IntN(s.cfg.Replicas)]
		f.victim, f.slot, f.at = r.id, r.slot, time.Now()
		s.faults = append(s.faults, f)
		r.kill()
		if err := sleep(ctx, s.cfg.bound()); err != nil {
			return err
		}
		if err := s.startReplica(ctx, r); err != nil {
			return err
		}
	case faultStop:
		r := s.replicas[s.rng.IntN(s.cfg.Replicas)]
		f.victim, f.slot, f.at = r.id, r.slot, time.Now()
		s.faults = append(s.faults, f)
		if err := r.pause(true); err != nil {
			return err
		}
		err := sleep(ctx, 2*ttl)
		if err2 := r.pause(false); err == nil {
			err = err2
		}
		if err != nil {
			return err
		}
	case faultLeaderPause:
		leader, err := s.etcd.Leader(ctx, 30*time.Second)
		if err != nil {
			return err
		}
		losses := s.leaseLosses(ctx)
		f.victim, f.at = s.etcd.Name(leader), time.Now()
		s.faults = append(s.faults, f)
		if err := s.etcd.Signal(leader, syscall.SIGSTOP); err != nil {
			return err
		}
		err = sleep(ctx, 1500*time.Millisecond)
		_ = s.etcd.Signal(leader, syscall.SIGCONT)
		if err != nil {
			return err
		}
		if err := sleep(ctx, ttl); err != nil {
			return err
		}
		s.leaderPauseLosses += s.leaseLosses(ctx) - losses
	case faultMemberKill:
		m := s.rng.IntN(s.etcd.Len())
		f.victim, f.at = s.etcd.Name(m), time.Now()
		s.faults = append(s.faults, f)
		s.etcd.Kill(m)
		if err := sleep(ctx, ttl); err != nil {
			return err
		}
		if err := s.etcd.Start(m); err != nil {
			return err
		}
		if _, err := s.etcd.Leader(ctx, 30*time.Second); err != nil {
			return err
		}
	case faultAddRemove:
		r := s.replicas[s.cfg.Replicas]
		f.victim, f.at = r.id, time.Now()
		s.faults = append(s.faults, f)
		if err := s.startReplica(ctx, r); err != nil {
			return err
		}
		if err := s.waitBalanced(ctx, kind+" (added)"); err != nil {
			return err
		}
		if err := sleep(ctx, ttl); err != nil {
			return err
		}
		if err := r.terminate(10*time.Second + 2*ttl); err != nil {
			return err
		}
	}
	s.cfg.Logf("soak: %s (%s) at +%v", kind, f.victim, time.Since(f.at).Round(time.Millisecond))
	return s.waitBalanced(ctx, kind+" of "+f.victim)
}

// leaseLosses is the sum of the running replicas' lease losses.
func (s *soak) leaseLosses(ctx context.Context) float64 {
	var sum float64
	for _, r := range s.replicas {
		if r.state() == running {
			v, _ := r.metric(ctx, "probed_cluster_lease_losses_total")
			sum += v
		}
	}
	return sum
}

func (s *soak) cleanup() {
	for _, r := range s.replicas {
		r.kill()
	}
	if s.backend != nil {
		s.backend.close()
	}
	if s.foreign != nil {
		_ = s.foreign.cli.Close()
	}
	if s.cli != nil {
		_ = s.cli.Close()
	}
	if s.etcd != nil {
		s.etcd.Stop()
	}
}
