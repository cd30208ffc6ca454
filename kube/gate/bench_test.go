package gate_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/store/memory"
)

// The benchmarks of `make bench-kube` (PROBED_KUBE_BENCH=1): figures for
// BENCHMARKS.md, logged, not asserted.

func benchOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("PROBED_KUBE_BENCH") != "1" {
		t.Skip("a benchmark: PROBED_KUBE_BENCH=1 (make bench-kube)")
	}
}

// conditionLog records, from an informer of the test's own, when each
// pod's probed.io/ready condition changed status, and every write of it
// (a change of the condition's status, reason, message or time).
type conditionLog struct {
	mu      sync.Mutex
	changes map[string][]statusAt // by pod name; guarded by mu
	writes  map[string]int        // condition writes seen, by pod name; guarded by mu
	says    map[string][]string   // each write's status/reason, by pod name; guarded by mu
}

type statusAt struct {
	status corev1.ConditionStatus
	at     time.Time
}

// logConditions follows the pods of ns.
func (f *fixture) logConditions(ns string) *conditionLog {
	l := &conditionLog{changes: map[string][]statusAt{}, writes: map[string]int{}, says: map[string][]string{}}
	factory := informers.NewSharedInformerFactoryWithOptions(f.kube, 0, informers.WithNamespace(ns))
	cond := func(obj any) (corev1.PodCondition, string, bool) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return corev1.PodCondition{}, "", false
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == podtarget.GateType {
				return c, pod.Name, true
			}
		}
		return corev1.PodCondition{}, pod.Name, false
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, obj any) {
		now := time.Now()
		old, _, hadOld := cond(oldObj)
		c, name, has := cond(obj)
		if !has || (hadOld && old == c) {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.writes[name]++
		l.says[name] = append(l.says[name], fmt.Sprintf("%s/%s", c.Status, c.Reason))
		if !hadOld || old.Status != c.Status {
			l.changes[name] = append(l.changes[name], statusAt{c.Status, now})
		}
	}})
	factory.Start(f.t.Context().Done())
	f.t.Cleanup(factory.Shutdown)
	factory.WaitForCacheSync(f.t.Context().Done())
	return l
}

// firstAfter returns when the pod's condition first turned status after
// since, waiting up to limit; false if it did not.
func (l *conditionLog) firstAfter(t *testing.T, name string, status corev1.ConditionStatus, since time.Time, limit time.Duration) (time.Time, bool) {
	t.Helper()
	var at time.Time
	err := poll.Wait("the condition "+string(status), limit, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.changes[name] {
			if c.status == status && c.at.After(since) {
				at = c.at
				return true
			}
		}
		return false
	})
	return at, err == nil
}

// busiest returns the condition writes (status/reason) of the pod
// written most, for the log: why a pod was written more than once.
func (l *conditionLog) busiest() (string, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var name string
	for n, w := range l.says {
		if name == "" || len(w) > len(l.says[name]) || len(w) == len(l.says[name]) && n < name {
			name = n
		}
	}
	return name, slices.Clone(l.says[name])
}

// totalWrites returns the condition writes seen, and the most of one pod.
func (l *conditionLog) totalWrites() (total, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.writes {
		total += n
		most = max(most, n)
	}
	return total, most
}

// quantiles returns p50, p99 and the max of ds.
func quantiles(ds []time.Duration) (p50, p99, top time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return q(0.5), q(0.99), s[len(s)-1]
}

// fastProbes probe every 50 ms and fail or succeed at the first answer.
const fastProbes = `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -950, "timeoutSeconds": 1, "timeoutMilliseconds": -800, "failureThreshold": 1}}`

// steadyProbes probe every 250 ms (the steady pods: probed's own load
// stays small beside the controller's).
const steadyProbes = `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -750, "timeoutSeconds": 1, "timeoutMilliseconds": -800, "failureThreshold": 1}}`

// transitions follows probed's readiness flips of the test's targets.
type transitions struct {
	mu  sync.Mutex
	log map[string][]statusAt // by pod name; guarded by mu
}

// logTransitions follows probed's events of namespace ns.
func (f *fixture) logTransitions(ns string) *transitions {
	tr := &transitions{log: map[string][]statusAt{}}
	ch := f.pc.Watch(f.t.Context(), client.WithLabels(map[string]string{podtarget.LabelNamespace: ns}),
		client.WithKinds(probev1.EventKind_EVENT_KIND_TRANSITION))
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range ch {
			now := time.Now()
			tr.mu.Lock()
			for _, ev := range r.Events {
				if ev.GetProbeType() != probev1.ProbeType_PROBE_TYPE_READINESS {
					continue
				}
				_, name, _ := strings.Cut(ev.GetName(), "/")
				st := corev1.ConditionFalse
				if ev.GetReady() {
					st = corev1.ConditionTrue
				}
				tr.log[name] = append(tr.log[name], statusAt{st, now})
			}
			tr.mu.Unlock()
		}
	})
	f.t.Cleanup(wg.Wait)
	return tr
}

// firstAfter returns when probed's event of the pod's readiness turning
// status after since arrived, if it did.
func (tr *transitions) firstAfter(name string, status corev1.ConditionStatus, since time.Time) (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.log[name] {
		if c.status == status && c.at.After(since) {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// TestFlappingBesideSteady: 20 pods whose backends flip every 100 ms
// beside 300 steady ones (PROBED_KUBE_STEADY_PODS), the controller a
// process of its own: its condition writes per second, its CPU, and how
// long a steady pod's flip takes to reach its condition, first with every
// flip written (--condition-min-interval=1ns: no damping, the baseline)
// and then with the default damping (1 s), in one run.
func TestFlappingBesideSteady(t *testing.T) {
	benchOnly(t)
	f := setup(t)
	steadyN := envInt("PROBED_KUBE_STEADY_PODS", 300)
	const flappingN, flipEvery, phase = 20, 100 * time.Millisecond, 10 * time.Second
	steady := f.createPodsIn(f.ns, "steady", steadyN, steadyProbes)
	flapping := f.createPodsIn(f.ns, "flap", flappingN, fastProbes)
	for _, ip := range steady {
		f.net.set(ip, true)
	}
	for _, ip := range flapping {
		f.net.set(ip, true)
	}
	log := f.logConditions(f.ns)
	events := f.logTransitions(f.ns)
	steadyNames := make([]string, 0, len(steady))
	for name := range steady {
		steadyNames = append(steadyNames, name)
	}
	slices.Sort(steadyNames)
	t.Logf("%d steady and %d flapping pods, probed every 50 ms; each phase %v", steadyN, flappingN, phase)
	t.Logf("a steady pod's flip: from probed's event to the condition's change (and from the backend's change, through a 250 ms probe)")
	t.Logf("%-28s %10s %9s %9s %9s %9s %9s %9s", "controller", "writes/s", "CPU", "flip p50", "flip p99", "flip max", "missed", "e2e p99")
	for _, mode := range []struct{ name, interval string }{
		{"every flip written (1ns)", "1ns"},
		{"damped (1 s, the default)", "1s"},
	} {
		p := f.startProcess("--namespace", f.ns, "--condition-min-interval", mode.interval)
		f.waitConditions(corev1.ConditionTrue, steadyN+flappingN, 3*time.Minute)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			tick := time.NewTicker(flipEvery)
			defer tick.Stop()
			healthy := true
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				healthy = !healthy
				for _, ip := range flapping {
					f.net.set(ip, healthy)
				}
			}
		})
		writes0, _ := p.patches()
		cpu0 := p.cpu()
		start := time.Now()
		var delays, e2e []time.Duration
		missed := 0
		for i := 0; time.Since(start) < phase; i++ {
			name := steadyNames[i%len(steadyNames)]
			flipped := time.Now()
			f.net.set(steady[name], false)
			at, ok := log.firstAfter(t, name, corev1.ConditionFalse, flipped, 5*time.Second)
			f.net.set(steady[name], true)
			seen, okEvent := events.firstAfter(name, corev1.ConditionFalse, flipped)
			if !ok || !okEvent {
				missed++
				continue
			}
			delays = append(delays, at.Sub(seen))
			e2e = append(e2e, at.Sub(flipped))
			time.Sleep(200 * time.Millisecond) // pacing: a steady pod's flip every ~0.25 s
		}
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		writes1, errs := p.patches()
		cpu := p.cpu() - cpu0
		for _, ip := range flapping {
			f.net.set(ip, true)
		}
		p50, p99, top := quantiles(delays)
		_, e2e99, _ := quantiles(e2e)
		t.Logf("%-28s %10.1f %8.0f%% %9v %9v %9v %9d %9v   (%d steady flips, %.0f patch errors)",
			mode.name, (writes1-writes0)/elapsed.Seconds(), 100*cpu.Seconds()/elapsed.Seconds(),
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), top.Round(time.Millisecond), missed,
			e2e99.Round(time.Millisecond), len(delays), errs)
		f.waitConditions(corev1.ConditionTrue, steadyN+flappingN, 3*time.Minute)
		p.stop()
	}
}

// endpointLog records when each pod IP's endpoint first turned ready in
// the Service web's EndpointSlices.
type endpointLog struct {
	mu    sync.Mutex
	ready map[string]time.Time // by IP; guarded by mu
}

func (f *fixture) logEndpoints(ns string) *endpointLog {
	l := &endpointLog{ready: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(f.kube, 0, informers.WithNamespace(ns))
	on := func(obj any) {
		now := time.Now()
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && len(ep.Addresses) > 0 {
				if _, seen := l.ready[ep.Addresses[0]]; !seen {
					l.ready[ep.Addresses[0]] = now
				}
			}
		}
	}
	_, _ = factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) },
	})
	factory.Start(f.t.Context().Done())
	f.t.Cleanup(factory.Shutdown)
	factory.WaitForCacheSync(f.t.Context().Done())
	return l
}

func (l *endpointLog) at(ip string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.ready[ip]
	return t, ok
}

// rolloutProbes: every 50 ms until the first success, then every second
// (the README's example's shape).
const rolloutProbes = `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "initialPeriodSeconds": 0, "initialPeriodMilliseconds": 50, "timeoutSeconds": 1, "timeoutMilliseconds": -800, "failureThreshold": 1}}`

// TestRollout: a rolling update of 300 pods (PROBED_KUBE_ROLLOUT_PODS) in
// 4 waves, the controller a process of its own: each wave creates a
// quarter of the new pods, each pod's server starts answering at a random
// 0-2 s after the pod runs, and once the wave is ready a quarter of the
// old pods is deleted. Measured: from the server's first answer to
// probed.io/ready True and to its EndpointSlice endpoint ready; the
// condition writes per pod over the rollout; the writes in the 10 s
// after a controller restart.
func TestRollout(t *testing.T) {
	benchOnly(t)
	f := setup(t)
	n := envInt("PROBED_KUBE_ROLLOUT_PODS", 300)
	const waves = 4
	f.service()
	p := f.startProcess("--namespace", f.ns)
	old := f.createPodsIn(f.ns, "old", n, rolloutProbes)
	for _, ip := range old {
		f.net.set(ip, true)
	}
	f.waitConditions(corev1.ConditionTrue, n, 3*time.Minute)
	log := f.logConditions(f.ns)
	endpoints := f.logEndpoints(f.ns)
	writes0, _ := p.patches()
	cpu0 := p.cpu()
	oldNames := make([]string, 0, len(old))
	for name := range old {
		oldNames = append(oldNames, name)
	}
	sortStrings(oldNames)

	rng := rand.New(rand.NewPCG(1, 2))
	var (
		mu      sync.Mutex
		newIPs  = map[string]string{} // by name
		timers  []*time.Timer
		started = time.Now()
	)
	per := n / waves
	for w := range waves {
		names := make([]string, per)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i := range per {
			names[i] = fmt.Sprintf("new-%d-%03d", w, i)
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_, ip := f.podIn(f.ns, names[i], rolloutProbes, true)
				mu.Lock()
				newIPs[names[i]] = ip
				delay := time.Duration(rng.Int64N(int64(2 * time.Second)))
				timers = append(timers, time.AfterFunc(delay, func() { f.net.set(ip, true) }))
				mu.Unlock()
			})
		}
		wg.Wait()
		// The wave is ready: a quarter of the old pods goes.
		poll.UntilMet(t, "wave ready", 2*time.Minute, func() string {
			for _, name := range names {
				if _, ok := log.firstAfter(t, name, corev1.ConditionTrue, started, 0); !ok {
					return "pod " + name + " not True yet"
				}
			}
			return ""
		})
		for _, name := range oldNames[w*per : (w+1)*per] {
			if err := f.kube.CoreV1().Pods(f.ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rollout := time.Since(started)
	mu.Lock()
	for _, tm := range timers {
		tm.Stop()
	}
	mu.Unlock()
	var cond, slice []time.Duration
	for name, ip := range newIPs {
		answered := f.net.healthySince(ip)
		if at, ok := log.firstAfter(t, name, corev1.ConditionTrue, started, 10*time.Second); ok {
			cond = append(cond, at.Sub(answered))
		}
		f.endpointReady(ip, true)
		if at, ok := endpoints.at(ip); ok {
			slice = append(slice, at.Sub(answered))
		}
	}
	writes1, errs := p.patches()
	total, most := log.totalWrites()
	cpu := p.cpu() - cpu0
	c50, c99, cmax := quantiles(cond)
	s50, s99, smax := quantiles(slice)
	t.Logf("rollout of %d pods in %d waves (and %d old pods deleted) in %v; controller CPU %v (%.0f%% of one core)",
		n, waves, n, rollout.Round(time.Millisecond), cpu, 100*cpu.Seconds()/rollout.Seconds())
	t.Logf("%-44s %8s %8s %8s", "from the server's first answer to", "p50", "p99", "max")
	t.Logf("%-44s %8v %8v %8v", "probed.io/ready True", c50.Round(time.Millisecond), c99.Round(time.Millisecond), cmax.Round(time.Millisecond))
	t.Logf("%-44s %8v %8v %8v", "EndpointSlice endpoint ready", s50.Round(time.Millisecond), s99.Round(time.Millisecond), smax.Round(time.Millisecond))
	t.Logf("condition writes over the rollout: %.0f by the controller (%.0f errors), %d seen, at most %d for one pod, %d pods",
		writes1-writes0, errs, total, most, 2*n)
	if name, says := log.busiest(); len(says) > 1 {
		t.Logf("the pod written most, %s: %s", name, strings.Join(says, " → "))
	}

	// A controller restart writes nothing: 10 s (the window)
	// watched for writes after the new process has synced.
	p.stop()
	before, _ := log.totalWrites()
	restarted := time.Now()
	p2 := f.startProcess("--namespace", f.ns)
	poll.Until(t, "the restarted controller synced with probed", time.Minute, func() bool {
		return p2.metric("probed_kube_applies_total") > 0
	})
	converged := time.Since(restarted)
	time.Sleep(10 * time.Second) // the window the issue names: writes would show in it
	after, _ := log.totalWrites()
	w2, _ := p2.patches()
	t.Logf("controller restart: applied in %v; in the next 10 s %d condition writes seen, %.0f by the controller", converged.Round(time.Millisecond), after-before, w2)
}

func sortStrings(s []string) { sort.Strings(s) }

// podAddr matches a pod's address in a probe's message (grouped as one).
var podAddr = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:`)

// slowProbes: a TCP connection (to the pod network's accept-and-close
// port) every 10 s, and every initial period (100 ms:
// PROBED_KUBE_SCALE_INITIAL_MS) until the first success (many pods:
// probed's own load stays small beside the controller's once they are
// ready).
func slowProbes() string {
	initial := envInt("PROBED_KUBE_SCALE_INITIAL_MS", 100)
	return fmt.Sprintf(`{"readinessProbe": {"tcpSocket": {"port": "tcp"}, "periodSeconds": 10, "initialPeriodSeconds": %d, "initialPeriodMilliseconds": %d}}`,
		initial/1000, initial%1000)
}

// spreadPods creates n opted-in pods over k namespaces of the test (all
// labelled sel), their servers answering, and returns the namespaces.
func (f *fixture) spreadPods(n, k int, sel map[string]string) []string {
	f.t.Helper()
	var namespaces []string
	for i := range k {
		ns := f.namespace(fmt.Sprintf("n%02d", i), sel)
		namespaces = append(namespaces, ns)
		per := n / k
		if i < n%k {
			per++
		}
		for _, ip := range f.createPodsIn(ns, "web", per, slowProbes()) {
			f.net.set(ip, true)
		}
	}
	return namespaces
}

// countTrue counts the pods of namespaces whose probed.io/ready is True.
func (f *fixture) countTrue(namespaces []string) int {
	f.t.Helper()
	got := 0
	for _, ns := range namespaces {
		pods, err := f.kube.CoreV1().Pods(ns).List(f.t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			f.t.Fatal(err)
		}
		for i := range pods.Items {
			for _, c := range pods.Items[i].Status.Conditions {
				if c.Type == podtarget.GateType && c.Status == corev1.ConditionTrue {
					got++
				}
			}
		}
	}
	return got
}

// TestTenThousandPods: 10,000 opted-in pods (PROBED_KUBE_SCALE_PODS) over
// 20 namespaces (PROBED_KUBE_SCALE_NAMESPACES), the controller a process
// of its own: the time to register and make them all ready, its memory
// and CPU at rest, and the time to converge after a restart (with the
// writes it costs: none).
func TestTenThousandPods(t *testing.T) {
	benchOnly(t)
	f := setup(t)
	n := envInt("PROBED_KUBE_SCALE_PODS", 10000)
	k := envInt("PROBED_KUBE_SCALE_NAMESPACES", 20)
	sel := map[string]string{"probed.io/test": f.ns}
	start := time.Now()
	namespaces := f.spreadPods(n, k, sel)
	t.Logf("%d pods over %d namespaces created and running in %v", n, k, time.Since(start).Round(time.Second))

	p := f.startProcess("--namespace-selector", "probed.io/test="+f.ns)
	started := time.Now()
	said := started
	poll.UntilMet(t, "every pod True", 10*time.Minute, func() string {
		if got := f.countTrue(namespaces); got < n {
			if time.Since(said) >= 30*time.Second {
				said = time.Now()
				t.Logf("%d of %d pods True %v after the controller started; controller: %.0f targets, %.0f applies, %.0f patches (%.0f errors), %.0f watch events, connected %.0f; probed: %+v",
					got, n, time.Since(started).Round(time.Second), p.metric("probed_kube_targets"), p.metric("probed_kube_applies_total"),
					p.metric("probed_kube_condition_patches_total"), p.metric("probed_kube_condition_patch_errors_total"),
					p.metric("probed_kube_watch_events_total"), p.metric("probed_kube_probed_connected"), f.probed.Engine.Stats())
				if targets, err := f.pc.ListAll(t.Context(), map[string]string{podtarget.LabelOwner: "ctl-" + f.ns}); err == nil {
					why := map[string]int{}
					for _, tg := range targets {
						if r := tg.GetStatus().GetReadiness(); !tg.GetStatus().GetReady() {
							why[r.GetResult().String()+": "+podAddr.ReplaceAllString(r.GetLastMessage(), "POD:")]++
						}
					}
					t.Logf("not ready in probed, by result and message: %v", why)
				}
			}
			time.Sleep(time.Second) // a list of 10,000 pods is ~50 MB: poll slowly
			return fmt.Sprintf("%d of %d pods True", got, n)
		}
		return ""
	})
	t.Logf("controller: every pod registered and True %v after it started", time.Since(started).Round(time.Millisecond))
	targets, err := f.pc.ListAll(t.Context(), map[string]string{podtarget.LabelOwner: "ctl-" + f.ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probed holds %d targets of the controller (%d pods)", len(targets), n)

	// At rest: 30 s of nothing but probed's events (none: nothing flips).
	cpu0, rest := p.cpu(), time.Now()
	time.Sleep(30 * time.Second) // the measuring window at rest
	cpu := p.cpu() - cpu0
	t.Logf("at rest: CPU %v in %v (%.1f%% of a core), RSS %.0f MiB, Go heap %.0f MiB",
		cpu, time.Since(rest).Round(time.Second), 100*cpu.Seconds()/time.Since(rest).Seconds(),
		float64(p.rss())/(1<<20), p.metric("go_memstats_heap_inuse_bytes")/(1<<20))

	// Restart: time to converge, writes.
	changes := f.probed.Engine.Stats().Changes
	p.stop()
	restarted := time.Now()
	p2 := f.startProcess("--namespace-selector", "probed.io/test="+f.ns)
	synced := time.Since(restarted)
	poll.UntilMet(t, "the restarted controller applied every namespace and drained its queue", 5*time.Minute, func() string {
		m := p2.metrics()
		if m["probed_kube_applies_total"] >= float64(k) && m["workqueue_depth"] == 0 && m["workqueue_work_duration_seconds_count"] >= m["workqueue_adds_total"] {
			return ""
		}
		return fmt.Sprintf("applies %v of %d, queue depth %v", m["probed_kube_applies_total"], k, m["workqueue_depth"])
	})
	converged := time.Since(restarted)
	cpuRestart := p2.cpu()
	w, errs := p2.patches()
	t.Logf("restart: pod cache synced %v after start, converged (every namespace applied, queue drained) after %v, CPU %v, RSS %.0f MiB, %.0f condition writes (%.0f errors); probed's changes meanwhile (flips the writes follow): %d",
		synced.Round(time.Millisecond), converged.Round(time.Millisecond), cpuRestart, float64(p2.rss())/(1<<20), w, errs, f.probed.Engine.Stats().Changes-changes)
}

// TestOverTwentyThousandAcrossNamespaces: 20,400 opted-in pods over 3
// namespaces (PROBED_KUBE_LARGE=1: about 10 min on two cores) all get
// their targets: one set per namespace stays under probed's 20,000 per
// set, where one set of the cluster hit it.
func TestOverTwentyThousandAcrossNamespaces(t *testing.T) {
	if os.Getenv("PROBED_KUBE_LARGE") != "1" {
		t.Skip("20,400 pods: PROBED_KUBE_LARGE=1")
	}
	f := setup(t)
	const n, k = 20_400, 3
	sel := map[string]string{"probed.io/test": f.ns}
	f.spreadPods(n, k, sel)
	f.startController(gate.Options{Scope: gate.Scope{NamespaceSelector: labels.SelectorFromSet(sel)}, Workers: 32})
	poll.UntilMet(t, "every target registered", 10*time.Minute, func() string {
		targets, err := f.pc.ListAll(t.Context(), map[string]string{podtarget.LabelOwner: "ctl-" + f.ns})
		if err != nil {
			t.Fatal(err)
		}
		if len(targets) == n {
			return ""
		}
		time.Sleep(time.Second) // listing 20,000 targets: poll slowly
		return fmt.Sprintf("%d of %d targets", len(targets), n)
	})
}

// TestProbedRestart: probed stops for 3 s, five times, while the pod's
// backend fails; the controller (a process of its own, redialling as the
// command does) resumes its watch, and the pod's condition turns False.
// Measured from probed listening again: the watch connected, and the
// condition False.
func TestProbedRestart(t *testing.T) {
	benchOnly(t)
	f := setup(t)
	store := memory.New(1)
	f.probed.Stop()
	f.pc = nil
	f.startProbed(probedtest.Options{Store: store})
	p := f.startProcess("--namespace", f.ns)
	_, ip := f.pod("web-0", fastProbes, true)
	var resumed, failed []time.Duration
	for range 5 {
		f.net.set(ip, true)
		f.condition("web-0", "True", is(corev1.ConditionTrue, gate.ReasonReady))
		addr := f.probed.Addr
		f.probed.Stop()
		poll.Until(t, "the controller notices probed is gone", 30*time.Second, func() bool {
			return p.metric("probed_kube_probed_connected") == 0
		})
		f.net.set(ip, false)        // fails while probed is down
		time.Sleep(3 * time.Second) // the outage: the controller's backoff reaches its cap meanwhile
		listening := time.Now()
		f.startProbed(probedtest.Options{Store: store, Addr: addr})
		poll.Until(t, "the controller resumes", 30*time.Second, func() bool {
			return p.metric("probed_kube_probed_connected") == 1
		})
		resumed = append(resumed, time.Since(listening))
		f.condition("web-0", "False after probed's restart", is(corev1.ConditionFalse, gate.ReasonNotReady))
		failed = append(failed, time.Since(listening))
	}
	r50, _, rmax := quantiles(resumed)
	f50, _, fmax := quantiles(failed)
	t.Logf("probed restarted 5 times after 3 s down; from probed listening again:")
	t.Logf("  the controller's watch connected: median %v, max %v (%v)", r50.Round(time.Millisecond), rmax.Round(time.Millisecond), roundAll(resumed))
	t.Logf("  the failed pod's condition False:  median %v, max %v (%v)", f50.Round(time.Millisecond), fmax.Round(time.Millisecond), roundAll(failed))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
