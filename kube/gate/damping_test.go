package gate_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/kube/gate"
)

// TestFlappingPodDamped: a pod whose backend flips every 100 ms costs at
// most one condition write per MinInterval (and the first flip is written
// at once), and its condition ends as its backend does.
func TestFlappingPodDamped(t *testing.T) {
	f := setup(t)
	reg := prometheus.NewRegistry()
	const interval = 500 * time.Millisecond
	f.startController(gate.Options{Metrics: gate.NewMetrics(reg), MinInterval: interval})
	_, ip := f.pod("flappy", httpProbes, true)
	f.net.set(ip, true)
	f.condition("flappy", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	flips := f.countFlips()
	before, _ := patchCount(t, reg)

	start := time.Now()
	healthy := true
	tick := time.NewTicker(100 * time.Millisecond)
	for time.Since(start) < 4*time.Second {
		<-tick.C
		healthy = !healthy
		f.net.set(ip, healthy)
	}
	tick.Stop()
	f.net.set(ip, false) // the latest state
	elapsed := time.Since(start)
	f.condition("flappy", "False at last", is(corev1.ConditionFalse, gate.ReasonNotReady))
	settled := time.Since(start)
	after, errs := patchCount(t, reg)
	writes := after - before
	n := flips()
	t.Logf("%d flips in probed over %v, %.0f condition writes (%.0f errors), %.0f put off; False written %v after the flapping began",
		n, elapsed.Round(time.Millisecond), writes, errs, counter(t, reg, "probed_kube_condition_writes_damped_total"), settled.Round(time.Millisecond))
	// At most one write per interval since the flapping began (+1: the
	// first at once).
	if limit := float64(settled/interval) + 1; writes > limit {
		t.Errorf("%.0f writes in %v; want at most %.0f (one per %v)", writes, settled.Round(time.Millisecond), limit, interval)
	}
	if n < 10 {
		t.Fatalf("only %d flips in probed: the test flapped nothing", n)
	}
}
