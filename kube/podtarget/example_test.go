package podtarget_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/probed/probed/kube/podtarget"
)

// TestExampleDeployment checks the README's example: its pods opt in and
// their annotation gives a valid target.
func TestExampleDeployment(t *testing.T) {
	data, err := os.ReadFile("../../examples/kubernetes/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			t.Fatal("no Deployment in the example")
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		pod.Namespace, pod.Name, pod.Status.PodIP = "default", "web-1", "10.244.0.9"
		if !podtarget.OptedIn(pod) {
			t.Fatal("the example's pods do not opt in")
		}
		tg, err := podtarget.Target(pod, "probed-kube")
		if err != nil {
			t.Fatalf("the example's annotation: %v", err)
		}
		if got := tg.GetReadinessProbe().GetHttpGet().GetPort(); got != 80 {
			t.Errorf("named port resolved to %d; want 80", got)
		}
		return
	}
}
