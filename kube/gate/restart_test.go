package gate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedtest"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
	"github.com/probed/probed/store/memory"
)

// resourceVersion returns the pod's resourceVersion: unchanged means
// nobody wrote the pod.
func (f *fixture) resourceVersion(name string) string {
	f.t.Helper()
	pod, err := f.kube.CoreV1().Pods(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pod.ResourceVersion
}

func TestProbedUnreachableKeepsConditions(t *testing.T) {
	f := setup(t)
	store := memory.New(1)
	f.probed.Stop()
	f.pc = nil
	f.startProbed(probedtest.Options{Store: store})
	reg := prometheus.NewRegistry()
	metrics := gate.NewMetrics(reg)
	f.startController(gate.Options{Metrics: metrics})
	_, ip := f.pod("web-0", httpProbes, true)
	f.net.set(ip, true)
	f.condition("web-0", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	// The kubelet stand-in writes the pod's Ready after the gate: the
	// last write before the one the test watches for.
	f.podReady("web-0", corev1.ConditionTrue)
	rv := f.resourceVersion("web-0")
	patched, _ := patchCount(t, reg)

	addr := f.probed.Addr
	f.probed.Stop()
	waitFor(t, "the controller notices probed is gone", func() bool { ok, _, _ := metrics.Connected(); return !ok })
	// A fail-closed controller would queue the pod's key on noticing:
	// once the queue is drained, it would have patched.
	quiesce(t, reg)
	if got := f.resourceVersion("web-0"); got != rv {
		t.Errorf("pod written while probed was unreachable (resourceVersion %s -> %s)", rv, got)
	}

	// probed comes back with its data: the watch resumes by revision and
	// nothing flaps.
	f.startProbed(probedtest.Options{Store: store, Addr: addr})
	waitFor(t, "the controller reconnects", func() bool { ok, _, _ := metrics.Connected(); return ok })
	// Barrier: a canary pod's flip travels the resumed watch after
	// whatever probed resent for web-0, and the queue then drains.
	_, canary := f.pod("canary", httpProbes, true)
	f.net.set(canary, true)
	f.condition("canary", "True after the restart", is(corev1.ConditionTrue, gate.ReasonReady))
	quiesce(t, reg)
	if got := f.resourceVersion("web-0"); got != rv {
		t.Errorf("pod written after probed came back (resourceVersion %s -> %s)", rv, got)
	}
	if now, errs := patchCount(t, reg); now+errs != patched+1 {
		t.Errorf("%.0f patches while probed was away and back, the canary's aside; want none", now+errs-patched-1)
	}
	// And it still follows the pod.
	f.net.set(ip, false)
	f.condition("web-0", "False after the restart", is(corev1.ConditionFalse, gate.ReasonNotReady))
}

func TestControllerRestartConverges(t *testing.T) {
	f := setup(t)
	stop := f.startController(gate.Options{})
	var ips []string
	for _, name := range []string{"a", "b", "c"} {
		_, ip := f.pod(name, httpProbes, true)
		f.net.set(ip, true)
		ips = append(ips, ip)
	}
	for _, name := range []string{"a", "b", "c"} {
		f.condition(name, "True", is(corev1.ConditionTrue, gate.ReasonReady))
	}
	rvA, rvB := f.resourceVersion("a"), f.resourceVersion("b")
	if err := stop(); err != nil {
		t.Fatalf("controller: %v", err)
	}

	// While it is down, pod c vanishes.
	zero := int64(0)
	if err := f.kube.CoreV1().Pods(f.ns).Delete(t.Context(), "c", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f.startController(gate.Options{Metrics: gate.NewMetrics(reg)})
	f.waitGone(podtarget.Name(f.ns, "c"))
	// The snapshot is in (c is pruned after it) and every pod's key was
	// queued by the cache's first sync: once the queue drains, any patch
	// the restart causes is sent.
	quiesce(t, reg)
	if a, b := f.resourceVersion("a"), f.resourceVersion("b"); a != rvA || b != rvB {
		t.Errorf("restart wrote the pods (a %s -> %s, b %s -> %s); want no patch", rvA, a, rvB, b)
	}
	// Not even a patch that changes nothing.
	if patches, errs := patchCount(t, reg); patches+errs != 0 {
		t.Errorf("restarted controller sent %.0f patches (%.0f failed); want none", patches+errs, errs)
	}
	f.net.set(ips[0], false)
	f.condition("a", "False", is(corev1.ConditionFalse, gate.ReasonNotReady))
}

func TestLeaderElectionFailover(t *testing.T) {
	f := setup(t)
	_, ip := f.pod("web-0", httpProbes, true)
	var (
		mu      sync.Mutex
		leaders []string
		ledAt   = map[string]time.Time{}
	)
	start := func(id string) (stop func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- gate.RunElected(ctx, f.kube, gate.Election{
				Namespace: f.ns, Name: "probed-kube", Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
				OnLeading: func(leading bool) {
					if leading {
						mu.Lock()
						leaders = append(leaders, id)
						ledAt[id] = time.Now()
						mu.Unlock()
					}
				},
			}, func(ctx context.Context) error {
				return gate.New(f.kube, gate.NewProber(f.pc), gate.Options{Scope: gate.Scope{Namespace: f.ns}, Owner: "ha"}).Run(ctx)
			})
		}()
		var once sync.Once
		var err error
		stop = func() error {
			once.Do(func() { cancel(); err = <-done })
			return err
		}
		t.Cleanup(func() { _ = stop() })
		return stop
	}
	replicas := map[string]func() error{"one": start("one"), "two": start("two")}
	waitFor(t, "a leader", func() bool { mu.Lock(); defer mu.Unlock(); return len(leaders) == 1 })
	f.net.set(ip, true)
	f.condition("web-0", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	mu.Lock()
	first := leaders[0]
	mu.Unlock()

	// The leader stops (a rolling update): it releases the Lease and the
	// other replica takes over.
	stopped := time.Now()
	if err := replicas[first](); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("stopped leader: %v", err)
	}
	waitFor(t, "the other replica leads", func() bool { mu.Lock(); defer mu.Unlock(); return len(leaders) == 2 })
	mu.Lock()
	second := leaders[1]
	failover := ledAt[second].Sub(stopped)
	mu.Unlock()
	if second == first {
		t.Fatalf("leaders %v", leaders)
	}
	t.Logf("failover (released Lease): %v", failover)
	f.net.set(ip, false)
	f.condition("web-0", "False under the new leader", is(corev1.ConditionFalse, gate.ReasonNotReady))
}

// waitFor waits up to 30 s for ok.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	poll.Until(t, what, 30*time.Second, ok)
}
