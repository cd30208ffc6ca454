package gate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// serverOnlyBad is an annotation the controller's validation accepts
// (it knows no floor) and the test's probed refuses: a period of 5 ms,
// under its --min-period of 10 ms.
const serverOnlyBad = `{"readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1, "periodMilliseconds": -995}}`

// controllerBad is an annotation the controller refuses itself.
const controllerBad = `{"readinessProbe": {"tcpSocket": {"port": "nope"}}}`

// TestBadPodsIsolated: 100 and 400 pods whose probes probed refuses (it
// names at most 100 violations per refusal), and a few the controller
// refuses itself, in one namespace; a good pod in another namespace and
// one in the same namespace still get their targets and their
// conditions. Each bad pod is refused once, with its Event and
// condition, and not sent again by later applies.
func TestBadPodsIsolated(t *testing.T) {
	for _, n := range []int{100, 400} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := setup(t)
			sel := map[string]string{"probed.io/test": f.ns}
			bad := f.namespace("bad", sel)
			good := f.namespace("good", sel)
			reg := prometheus.NewRegistry()
			f.startController(gate.Options{
				Scope:   gate.Scope{NamespaceSelector: labels.SelectorFromSet(sel)},
				Metrics: gate.NewMetrics(reg),
			})
			start := time.Now()
			f.createPodsIn(bad, "bad", n, serverOnlyBad)
			f.createPodsIn(bad, "worse", 5, controllerBad)
			t.Logf("%d bad pods created and running in %v", n+5, time.Since(start).Round(time.Millisecond))

			created := time.Now()
			_, ip := f.podIn(good, "web", httpProbes, true)
			_, ipBad := f.podIn(bad, "web", httpProbes, true)
			f.net.set(ip, true)
			f.net.set(ipBad, true)
			f.waitTarget(podtarget.Name(good, "web"), func(*probev1.Target) bool { return true })
			t.Logf("good pod's target in %v", time.Since(created).Round(time.Millisecond))
			f.conditionIn(good, "web", "True", is(corev1.ConditionTrue, gate.ReasonReady))
			t.Logf("good pod True in %v", time.Since(created).Round(time.Millisecond))
			f.conditionIn(bad, "web", "True beside the bad pods", is(corev1.ConditionTrue, gate.ReasonReady))

			// Every bad pod says why, with the field.
			poll.UntilMet(t, "every bad pod InvalidProbes", 60*time.Second, func() string {
				pods, err := f.kube.CoreV1().Pods(bad).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
				if err != nil {
					t.Fatal(err)
				}
				missing := n + 5
				for i := range pods.Items {
					p := &pods.Items[i]
					if strings.HasPrefix(p.Name, "bad-") && invalidNaming(p, "readinessProbe.periodMilliseconds") ||
						strings.HasPrefix(p.Name, "worse-") && invalidNaming(p, "readinessProbe.tcpSocket.port") {
						missing--
					}
				}
				if missing > 0 {
					return fmt.Sprintf("%d bad pods without their InvalidProbes condition", missing)
				}
				return ""
			})
			f.eventIn(bad, "bad-00000", gate.ReasonInvalidProbes, "periodMilliseconds")
			f.eventIn(bad, "worse-00000", gate.ReasonInvalidProbes, `"nope"`)

			// Remembered: another apply of the namespace (a new pod)
			// sends none of them again.
			refused := counter(t, reg, "probed_kube_pods_refused_total")
			if refused != float64(n+5) {
				t.Errorf("%v refusals; want one per bad pod, %d", refused, n+5)
			}
			_, ip2 := f.podIn(bad, "web-2", httpProbes, true)
			f.net.set(ip2, true)
			f.conditionIn(bad, "web-2", "True", is(corev1.ConditionTrue, gate.ReasonReady))
			if again := counter(t, reg, "probed_kube_pods_refused_total"); again != refused {
				t.Errorf("%v refusals after another apply of the namespace; want %v (each bad pod refused once)", again, refused)
			}
		})
	}
}

// invalidNaming reports whether the pod's probed.io/ready is
// False/InvalidProbes naming field.
func invalidNaming(pod *corev1.Pod, field string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == podtarget.GateType && c.Reason == gate.ReasonInvalidProbes && strings.Contains(c.Message, field) {
			return true
		}
	}
	return false
}

// counter sums the counter name of reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
