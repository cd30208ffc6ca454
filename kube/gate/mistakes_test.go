package gate_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/kube/gate"
	"github.com/probed/probed/kube/podtarget"
)

// TestGateMistakesReported: the annotation without the gate, and a gate
// under probed.io/ that is not probed.io/ready (a typo), each get a
// Warning Event.
func TestGateMistakesReported(t *testing.T) {
	f := setup(t)
	f.startController(gate.Options{})
	f.pod("no-gate", httpProbes, false)
	f.event("no-gate", gate.ReasonMissingGate, podtarget.InjectLabel)

	typo := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "typo", Namespace: f.ns, Annotations: map[string]string{podtarget.ProbesAnnotation: httpProbes}},
		Spec: corev1.PodSpec{
			NodeName:       f.kubelet.Node(),
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "probed.io/redy"}},
			Containers:     []corev1.Container{{Name: "app", Image: "example.invalid/app"}},
		},
	}
	if _, err := f.kube.CoreV1().Pods(f.ns).Create(t.Context(), typo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.event("typo", gate.ReasonUnknownGate, `"probed.io/redy"`)
}
