package gate_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestReadyUnreadyReady(t *testing.T) {
	f := setup(t)
	f.service()
	f.startController(gate.Options{})
	_, ip := f.pod("web-0", httpProbes, true)

	// Never ready: no condition yet (kubelet counts it as not ready).
	f.podReady("web-0", corev1.ConditionFalse)
	f.net.set(ip, true)
	first := f.condition("web-0", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	f.podReady("web-0", corev1.ConditionTrue)
	f.endpointReady(ip, true)

	f.net.set(ip, false)
	down := f.condition("web-0", "False/NotReady", is(corev1.ConditionFalse, gate.ReasonNotReady))
	// The condition says the probe failed, never what the pod answered
	// (a status line, a body: conditions are readable by anyone who may
	// read the pod).
	if !strings.HasPrefix(down.Message, "the readiness probe failed") || strings.Contains(down.Message, "503") || strings.Contains(down.Message, "not yet") {
		t.Errorf("NotReady message %q; want the fixed summary and nothing of the answer", down.Message)
	}
	if !down.LastTransitionTime.After(first.LastTransitionTime.Time) && down.LastTransitionTime != first.LastTransitionTime {
		t.Errorf("lastTransitionTime %v went back from %v", down.LastTransitionTime, first.LastTransitionTime)
	}
	f.podReady("web-0", corev1.ConditionFalse)
	f.endpointReady(ip, false)

	f.net.set(ip, true)
	f.condition("web-0", "True again", is(corev1.ConditionTrue, gate.ReasonReady))
	f.podReady("web-0", corev1.ConditionTrue)
	f.endpointReady(ip, true)

	// The target: named after the pod, labelled with it, aimed at its IP
	// on the named port.
	tg, err := f.pc.Get(t.Context(), podtarget.Name(f.ns, "web-0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.GetReadinessProbe().GetHttpGet(); got.GetHost() != ip || got.GetPort() != f.net.port {
		t.Errorf("probe aims at %s:%d; want %s:%d", got.GetHost(), got.GetPort(), ip, f.net.port)
	}
	if l := tg.GetLabels(); l[podtarget.LabelNamespace] != f.ns || l[podtarget.LabelPod] != "web-0" || l[podtarget.LabelUID] == "" {
		t.Errorf("labels %v", l)
	}
}

func TestIgnoredPods(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	f.pod("plain", httpProbes, false)         // annotation, no gate
	_, ip := f.pod("gated", httpProbes, true) // both
	f.net.set(ip, true)
	f.condition("gated", "True", is(corev1.ConditionTrue, gate.ReasonReady))

	targets, err := f.pc.ListAll(t.Context(), map[string]string{podtarget.LabelNamespace: f.ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].GetName() != podtarget.Name(f.ns, "gated") {
		t.Errorf("targets %v; want only the gated pod's", names(targets))
	}
	pod, err := f.kube.CoreV1().Pods(f.ns).Get(t.Context(), "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == podtarget.GateType {
			t.Errorf("pod without the gate got the condition: %+v", c)
		}
	}
}

func TestBadAnnotation(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	_, ip := f.pod("bad", `{"readinessProbe": {"httpGet": {"port": "grpc"}}}`, true)
	f.net.set(ip, true)
	c := f.condition("bad", "False/InvalidProbes", is(corev1.ConditionFalse, gate.ReasonInvalidProbes))
	const field = "metadata.annotations[probed.io/probes].readinessProbe.httpGet.port"
	if !strings.Contains(c.Message, field) {
		t.Errorf("message %q does not name %s", c.Message, field)
	}
	f.event("bad", gate.ReasonInvalidProbes, field)

	// A probe probed itself refuses (a period of 2 s - 5 s) is named too.
	f.annotate("bad", `{"readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 2, "periodMilliseconds": -5000}}`)
	c = f.condition("bad", "names periodMilliseconds", func(c *corev1.PodCondition) bool {
		return c != nil && c.Reason == gate.ReasonInvalidProbes && strings.Contains(c.Message, "readinessProbe.periodMilliseconds")
	})
	t.Logf("server-side violation: %s", c.Message)

	// Fixed: the pod turns ready.
	f.annotate("bad", httpProbes)
	f.condition("bad", "True", is(corev1.ConditionTrue, gate.ReasonReady))

	// No annotation at all: the gate's condition says what is missing.
	f.pod("none", "", true)
	f.condition("none", "False/InvalidProbes", is(corev1.ConditionFalse, gate.ReasonInvalidProbes))
}

func TestIPChange(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	pod, ip := f.pod("moving", httpProbes, true)
	f.net.set(ip, true)
	f.condition("moving", "True", is(corev1.ConditionTrue, gate.ReasonReady))

	newIP := nextPodIP()
	f.net.set(ip, false)
	if _, err := f.kubelet.SetIP(t.Context(), pod, newIP); err != nil {
		t.Fatal(err)
	}
	f.waitTarget(podtarget.Name(f.ns, "moving"), func(tg *probev1.Target) bool {
		return tg.GetReadinessProbe().GetHttpGet().GetHost() == newIP
	})
	// The old address fails; the new one is not healthy yet.
	f.condition("moving", "False at the new IP", is(corev1.ConditionFalse, gate.ReasonNotReady))
	f.net.set(newIP, true)
	f.condition("moving", "True at the new IP", is(corev1.ConditionTrue, gate.ReasonReady))
}

func TestContainerRestartResets(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	pod, ip := f.pod("restarting", httpProbes, true)
	f.net.set(ip, true)
	f.condition("restarting", "True", is(corev1.ConditionTrue, gate.ReasonReady))

	name := podtarget.Name(f.ns, "restarting")
	events := f.pc.Watch(t.Context(), client.WithNames(name), client.WithKinds(probev1.EventKind_EVENT_KIND_RESET))
	first := <-events // the snapshot
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	if _, err := f.kubelet.RestartContainers(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case r := <-events:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for _, ev := range r.Events {
				if ev.GetKind() == probev1.EventKind_EVENT_KIND_RESET {
					f.condition("restarting", "True after the reset", is(corev1.ConditionTrue, gate.ReasonReady))
					return
				}
			}
		case <-deadline:
			t.Fatal("no RESET event within 30 s of the container restart")
		}
	}
}

func TestDeletion(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	_, ip := f.pod("going", httpProbes, true)
	f.net.set(ip, true)
	f.condition("going", "True", is(corev1.ConditionTrue, gate.ReasonReady))

	// Graceful deletion: the pod stays, terminating, until its kubelet
	// removes it; the condition turns False at once and the target goes.
	if err := f.kube.CoreV1().Pods(f.ns).Delete(t.Context(), "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.condition("going", "False/Terminating", is(corev1.ConditionFalse, gate.ReasonTerminating))
	f.waitGone(podtarget.Name(f.ns, "going"))
	zero := int64(0)
	if err := f.kube.CoreV1().Pods(f.ns).Delete(t.Context(), "going", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

func TestRBACDenied(t *testing.T) {
	f := setup(t)
	kube := f.clientAs(t, "nobody")
	err := gate.New(kube, gate.NewProber(f.pc), gate.Options{Scope: gate.Scope{Namespace: f.ns}}).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "list pods") {
		t.Fatalf("Run as a user with no permission = %v; want a clear list pods forbidden error", err)
	}
	t.Logf("error: %v", err)
}

func names(ts []*probev1.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.GetName())
	}
	return out
}

func TestLivenessFailureEvent(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	_, ip := f.pod("sick", `{"livenessProbe": {"httpGet": {"port": "http", "path": "/healthz"}, "periodSeconds": 1, "periodMilliseconds": -950, "failureThreshold": 2}}`, true)
	f.net.set(ip, true)
	f.condition("sick", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	f.net.set(ip, false)
	// probed restarts nothing: the pod gets an Event, and stays ready (it
	// has no readiness probe).
	f.event("sick", gate.ReasonLivenessFailed, "the liveness probe failed")
	f.condition("sick", "still True", is(corev1.ConditionTrue, gate.ReasonReady))
}

// TestConditionCarriesNoAnswer: what the probed address answered (here
// a body an expectedBody mismatch would quote) reaches neither the
// condition nor an Event: both are readable by anyone who may read the
// pod.
func TestConditionCarriesNoAnswer(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	_, ip := f.pod("leaky", `{"readinessProbe": {"httpGet": {"port": "http", "path": "/secret", "expectedBody": "something else"}, "periodSeconds": 1, "periodMilliseconds": -950, "failureThreshold": 1},
		"livenessProbe": {"httpGet": {"port": "http", "path": "/secret", "expectedBody": "something else"}, "periodSeconds": 1, "periodMilliseconds": -950, "failureThreshold": 1}}`, true)
	f.net.set(ip, true)
	f.event("leaky", gate.ReasonLivenessFailed, "the liveness probe failed")
	// The condition is written only once the pod was ready or something
	// is wrong: make it ready through the same probe, then not.
	f.annotate("leaky", httpProbes)
	f.condition("leaky", "True", is(corev1.ConditionTrue, gate.ReasonReady))
	f.annotate("leaky", `{"readinessProbe": {"httpGet": {"port": "http", "path": "/secret", "expectedBody": "something else"}, "periodSeconds": 1, "periodMilliseconds": -950, "failureThreshold": 1}}`)
	c := f.condition("leaky", "False/NotReady", is(corev1.ConditionFalse, gate.ReasonNotReady))
	tg, err := f.pc.Get(t.Context(), podtarget.Name(f.ns, "leaky"))
	if err != nil {
		t.Fatal(err)
	}
	if msg := tg.GetStatus().GetReadiness().GetLastMessage(); !strings.Contains(msg, secretBody) {
		t.Fatalf("probed's own message %q does not quote the answer: the test proves nothing", msg)
	}
	if strings.Contains(c.Message, secretBody) {
		t.Errorf("condition message %q quotes the answer", c.Message)
	}
	evs, err := f.kube.CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=leaky"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, secretBody) {
			t.Errorf("Event %s %q quotes the answer", ev.Reason, ev.Message)
		}
	}
}
