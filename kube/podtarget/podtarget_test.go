package podtarget_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func pod(annotation string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "u-1"},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: podtarget.GateType}},
			Containers: []corev1.Container{
				{Name: "side", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9000}}},
				{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8081}}},
			},
		},
		Status: corev1.PodStatus{PodIP: "10.244.0.7"},
	}
	if annotation != "" {
		p.Annotations = map[string]string{podtarget.ProbesAnnotation: annotation}
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestTarget(t *testing.T) {
	labels := map[string]string{
		podtarget.LabelNamespace: "shop", podtarget.LabelPod: "web-1",
		podtarget.LabelUID: "u-1", podtarget.LabelOwner: "ctl",
	}
	tests := []struct {
		name       string
		annotation string
		want       *probev1.Target
	}{
		{
			name:       "named port",
			annotation: `{"readinessProbe": {"httpGet": {"port": "http", "path": "/ready"}, "periodSeconds": 1, "periodMilliseconds": -950}}`,
			want: &probev1.Target{Name: "shop/web-1", Labels: labels, ReadinessProbe: &probev1.Probe{
				Handler:            &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "10.244.0.7", Port: 8081, Path: "/ready"}},
				PeriodSeconds:      1,
				PeriodMilliseconds: ptr(int32(-950)),
			}},
		},
		{
			name:       "numeric port, liveness and startup",
			annotation: `{"livenessProbe": {"tcpSocket": {"port": 9000}}, "startupProbe": {"grpc": {"port": "9000", "host": "10.244.0.7"}}}`,
			want: &probev1.Target{Name: "shop/web-1", Labels: labels,
				LivenessProbe: &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "10.244.0.7", Port: 9000}}},
				StartupProbe:  &probev1.Probe{Handler: &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: "10.244.0.7", Port: 9000}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podtarget.Target(pod(tt.annotation), "ctl")
			if err != nil {
				t.Fatalf("Target: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTargetInvalid(t *testing.T) {
	const a = "metadata.annotations[probed.io/probes]"
	tests := []struct {
		name       string
		annotation string
		want       []string // fields
	}{
		{name: "missing", annotation: "", want: []string{a}},
		{name: "not JSON", annotation: `{"readinessProbe":`, want: []string{a}},
		{name: "no probe", annotation: `{}`, want: []string{a}},
		{name: "unknown top-level field", annotation: `{"readinesProbe": {}}`, want: []string{a + ".readinesProbe"}},
		{name: "unknown port name", annotation: `{"readinessProbe": {"httpGet": {"port": "grpc"}}}`, want: []string{a + ".readinessProbe.httpGet.port"}},
		{name: "port out of range", annotation: `{"readinessProbe": {"tcpSocket": {"port": "70000"}}}`, want: []string{a + ".readinessProbe.tcpSocket.port"}},
		{name: "other host", annotation: `{"livenessProbe": {"httpGet": {"host": "169.254.169.254", "port": 80}}}`, want: []string{a + ".livenessProbe.httpGet.host"}},
		{name: "exec", annotation: `{"readinessProbe": {"exec": {"command": ["true"]}}}`, want: []string{a + ".readinessProbe.exec"}},
		{name: "probed's validation: no port", annotation: `{"readinessProbe": {"tcpSocket": {}}}`, want: []string{a + ".readinessProbe.tcpSocket.port"}},
		{name: "probed's validation: negative period", annotation: `{"readinessProbe": {"tcpSocket": {"port": 1}, "periodSeconds": -1}}`, want: []string{a + ".readinessProbe.periodSeconds"}},
		{name: "probed's validation: no handler", annotation: `{"livenessProbe": {"periodSeconds": 1}}`, want: []string{a + ".livenessProbe"}},
		{name: "unknown probe field", annotation: `{"readinessProbe": {"tcpSocket": {"port": 1}, "perodSeconds": 1}}`, want: []string{a + ".readinessProbe"}},
		{
			name:       "every error at once",
			annotation: `{"startupProbe": {"httpGet": {"port": "nope"}}, "readinessProbe": {"exec": {}}, "x": 1}`,
			want:       []string{a + ".startupProbe.httpGet.port", a + ".readinessProbe.exec", a + ".x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := podtarget.Target(pod(tt.annotation), "ctl")
			var inv *podtarget.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Target = %v; want an *InvalidError", err)
			}
			var got []string
			for _, fe := range inv.Errors {
				got = append(got, fe.Field)
				if fe.Detail == "" {
					t.Errorf("%s: no detail", fe.Field)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s\n(%v)", diff, err)
			}
		})
	}
}

func TestTargetNoIP(t *testing.T) {
	p := pod(`{"readinessProbe": {"tcpSocket": {"port": 1}}}`)
	p.Status.PodIP = ""
	if _, err := podtarget.Target(p, "ctl"); err == nil {
		t.Error("Target of a pod with no IP: no error")
	}
}

func TestOptedIn(t *testing.T) {
	p := pod("")
	if !podtarget.OptedIn(p) {
		t.Error("pod with the gate: not opted in")
	}
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "other.io/ready"}}
	if podtarget.OptedIn(p) {
		t.Error("pod with another gate: opted in")
	}
}

func TestServiceLabels(t *testing.T) {
	const probes = `{"readinessProbe": {"grpc": {"port": "http"}}}`
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[string]string // the service labels
		bad         []string          // fields
	}{
		{name: "none", want: map[string]string{}},
		{name: "service", annotations: map[string]string{podtarget.ServiceAnnotation: "web"}, want: map[string]string{podtarget.LabelService: "web"}},
		{name: "service and named serving port", annotations: map[string]string{podtarget.ServiceAnnotation: "web", podtarget.ServingPortAnnotation: "metrics"},
			want: map[string]string{podtarget.LabelService: "web", podtarget.LabelServingPort: "9000"}},
		{name: "numeric serving port", annotations: map[string]string{podtarget.ServingPortAnnotation: "8443"}, want: map[string]string{podtarget.LabelServingPort: "8443"}},
		{name: "bad service", annotations: map[string]string{podtarget.ServiceAnnotation: "Web.shop"}, bad: []string{"metadata.annotations[probed.io/service]"}},
		{name: "service starting with a digit", annotations: map[string]string{podtarget.ServiceAnnotation: "1web"}, bad: []string{"metadata.annotations[probed.io/service]"}},
		{name: "bad port", annotations: map[string]string{podtarget.ServingPortAnnotation: "0"}, bad: []string{"metadata.annotations[probed.io/serving-port]"}},
		{name: "unknown port name", annotations: map[string]string{podtarget.ServingPortAnnotation: "grpc"}, bad: []string{"metadata.annotations[probed.io/serving-port]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(probes)
			for k, v := range tt.annotations {
				p.Annotations[k] = v
			}
			got, err := podtarget.Target(p, "ctl")
			if tt.bad != nil {
				inv, ok := errors.AsType[*podtarget.InvalidError](err)
				if !ok {
					t.Fatalf("Target = %v; want an *InvalidError", err)
				}
				var fields []string
				for _, fe := range inv.Errors {
					fields = append(fields, fe.Field)
				}
				if diff := cmp.Diff(tt.bad, fields); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			svc := map[string]string{}
			for _, k := range []string{podtarget.LabelService, podtarget.LabelServingPort} {
				if v, ok := got.GetLabels()[k]; ok {
					svc[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, svc); diff != "" {
				t.Errorf("service labels (-want +got):\n%s", diff)
			}
		})
	}
}
