package gate_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// envInt returns the environment variable name as an int, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// patchCount sums probed_kube_condition_patches_total.
func patchCount(t *testing.T, reg *prometheus.Registry) (patches, errs float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "probed_kube_condition_patches_total":
				patches += m.GetCounter().GetValue()
			case "probed_kube_condition_patch_errors_total":
				errs += m.GetCounter().GetValue()
			}
		}
	}
	return patches, errs
}

// createPods creates and runs n opted-in pods with annotation, 32 at a
// time, and returns their IPs by name.
func (f *fixture) createPods(n int, annotation string) map[string]string {
	f.t.Helper()
	return f.createPodsIn(f.ns, "web", n, annotation)
}

// createPodsIn creates and runs n opted-in pods named prefix-NNNN in ns
// with annotation, 32 at a time, and returns their IPs by name.
func (f *fixture) createPodsIn(ns, prefix string, n int, annotation string) map[string]string {
	f.t.Helper()
	ips := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("%s-%05d", prefix, i)
			_, ip := f.podIn(ns, name, annotation, true)
			mu.Lock()
			ips[name] = ip
			mu.Unlock()
		})
	}
	wg.Wait()
	return ips
}

// conditionCount counts the pods whose probed.io/ready is status.
func (f *fixture) waitConditions(status corev1.ConditionStatus, n int, timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pods, err := f.kube.CoreV1().Pods(f.ns).List(f.t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			f.t.Fatal(err)
		}
		got := 0
		for i := range pods.Items {
			for _, c := range pods.Items[i].Status.Conditions {
				if c.Type == podtarget.GateType && c.Status == status {
					got++
				}
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d of %d pods %s after %v", got, n, status, timeout)
		}
		time.Sleep(time.Second) // a list of 2,000 pods is ~10 MB
	}
}

// waitFailing waits until probed has n targets of the test's namespace,
// each with a failed readiness probe.
func (f *fixture) waitFailing(n int) {
	f.t.Helper()
	poll.UntilMet(f.t, "every target registered and failing", time.Minute, func() string {
		targets, err := f.pc.ListAll(f.t.Context(), map[string]string{podtarget.LabelNamespace: f.ns})
		if err != nil {
			f.t.Fatal(err)
		}
		failing := 0
		for _, tg := range targets {
			if tg.GetStatus().GetReadiness().GetResult() == probev1.Result_RESULT_FAILURE {
				failing++
			}
		}
		if failing == n {
			return ""
		}
		return fmt.Sprintf("%d of %d targets failing", failing, n)
	})
}

// countFlips follows probed's events of the test's targets and returns a
// function counting the flips of their readiness so far.
func (f *fixture) countFlips() func() int {
	var mu sync.Mutex
	ready := map[string]bool{}
	count := 0
	ch := f.pc.Watch(f.t.Context(), client.WithLabels(map[string]string{podtarget.LabelNamespace: f.ns}))
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range ch {
			mu.Lock()
			for _, ev := range r.Events {
				was, known := ready[ev.GetName()]
				if ev.GetReady() != was && (known || ev.GetReady()) {
					count++
				}
				ready[ev.GetName()] = ev.GetReady()
			}
			mu.Unlock()
		}
	})
	f.t.Cleanup(wg.Wait)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
}

// TestThousandsOfPods flips 2,000 pods (PROBED_KUBE_PODS) ready, unready
// and ready, and counts the controller's status patches: one per flip.
func TestThousandsOfPods(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 pods")
	}
	f := setup(t)
	n := envInt("PROBED_KUBE_PODS", 2000)
	reg := prometheus.NewRegistry()
	f.startController(gate.Options{Metrics: gate.NewMetrics(reg), Workers: 32})
	flips := f.countFlips()
	start := time.Now()
	// Probed every second: 2,000 HTTP probes a second on a shared machine.
	ips := f.createPods(n, `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "failureThreshold": 1}}`)
	t.Logf("%d pods created and running in %v", n, time.Since(start).Round(time.Millisecond))

	var total float64
	for round, healthy := range []bool{true, false, true} {
		status := corev1.ConditionTrue
		if !healthy {
			status = corev1.ConditionFalse
		}
		before, _ := patchCount(t, reg)
		flipsBefore := flips()
		flipped := time.Now()
		for _, ip := range ips {
			f.net.set(ip, healthy)
		}
		f.waitConditions(status, n, 3*time.Minute)
		took := time.Since(flipped)
		// Patches that should not happen would be sent from a key of the
		// queue: once it drains, they are counted.
		quiesce(t, reg)
		after, errs := patchCount(t, reg)
		patches := after - before
		nflips := flips() - flipsBefore
		total += patches
		t.Logf("round %d: %d pods %s in %v: %d flips in probed (%d beyond one per pod: the machine's load timed probes out), %.0f status patches (%.0f/s), %.0f patch errors",
			round, n, status, took.Round(time.Millisecond), nflips, nflips-n, patches, patches/took.Seconds(), errs)
		// One patch per flip at most (flips close together coalesce),
		// and at least one per pod.
		if patches > float64(nflips) || patches < float64(n) {
			t.Errorf("round %d: %.0f patches for %d flips of %d pods; want one per flip at most", round, patches, nflips, n)
		}
	}
}

// TestLatency measures, for PROBED_KUBE_LATENCY_PODS pods (default 50),
// the time from the pod's server starting to answer to probed.io/ready
// True on the pod and to its EndpointSlice endpoint ready, with a 50 ms
// initial period, beside kubelet's model: a period-P prober notices at a
// uniformly random phase of its period. Run by `make bench-kube`.
func TestLatency(t *testing.T) {
	if os.Getenv("PROBED_KUBE_BENCH") != "1" {
		t.Skip("a benchmark: PROBED_KUBE_BENCH=1 (make bench-kube)")
	}
	f := setup(t)
	n := envInt("PROBED_KUBE_LATENCY_PODS", 50)
	f.service()
	reg := prometheus.NewRegistry()
	f.startController(gate.Options{Metrics: gate.NewMetrics(reg)})

	var mu sync.Mutex
	condAt := map[string]time.Time{}  // pod IP -> condition True seen
	sliceAt := map[string]time.Time{} // pod IP -> endpoint ready seen
	factory := informers.NewSharedInformerFactoryWithOptions(f.kube, 0, informers.WithNamespace(f.ns))
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		now := time.Now()
		pod := obj.(*corev1.Pod)
		for _, c := range pod.Status.Conditions {
			if c.Type == podtarget.GateType && c.Status == corev1.ConditionTrue {
				mu.Lock()
				if _, ok := condAt[pod.Status.PodIP]; !ok {
					condAt[pod.Status.PodIP] = now
				}
				mu.Unlock()
			}
		}
	}})
	onSlice := func(obj any) {
		now := time.Now()
		s := obj.(*discoveryv1.EndpointSlice)
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready && len(ep.Addresses) > 0 {
				mu.Lock()
				if _, ok := sliceAt[ep.Addresses[0]]; !ok {
					sliceAt[ep.Addresses[0]] = now
				}
				mu.Unlock()
			}
		}
	}
	_, _ = factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onSlice, UpdateFunc: func(_, obj any) { onSlice(obj) },
	})
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	factory.WaitForCacheSync(t.Context().Done())

	// Fast until ready: 50 ms until the first success, then 1 s.
	ips := f.createPods(n, `{"readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "initialPeriodSeconds": 0, "initialPeriodMilliseconds": 50, "failureThreshold": 1}}`)
	f.waitFailing(n)
	for _, ip := range ips {
		f.net.set(ip, true)
		time.Sleep(20 * time.Millisecond) // spread the starts over the period
	}
	f.waitConditions(corev1.ConditionTrue, n, time.Minute)
	for _, ip := range ips {
		f.endpointReady(ip, true)
	}
	var cond, slice []time.Duration
	mu.Lock()
	for _, ip := range ips {
		started := f.net.healthySince(ip)
		cond = append(cond, condAt[ip].Sub(started))
		slice = append(slice, sliceAt[ip].Sub(started))
	}
	mu.Unlock()
	patches, _ := patchCount(t, reg)
	t.Logf("%d pods, 50 ms initial period; %.0f condition patches", n, patches)
	t.Logf("%-38s %8s %8s %8s", "from the server answering to", "p50", "p99", "max")
	row := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		t.Logf("%-38s %8v %8v %8v", what, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	row("probed.io/ready True (probed-kube)", cond)
	row("EndpointSlice ready (probed-kube)", slice)
	for _, p := range []time.Duration{time.Second, 10 * time.Second} {
		model := make([]time.Duration, n)
		for i := range model {
			model[i] = time.Duration(rand.Int64N(int64(p))) // the prober's phase
		}
		row(fmt.Sprintf("kubelet model, period %v (detection)", p), model)
	}
}
