package inject_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/probed/probed/kube/inject"
	"github.com/probed/probed/kube/podtarget"
)

func annotated(gates ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{podtarget.ProbesAnnotation: "{}"}}}
	for _, g := range gates {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)})
	}
	return p
}

func TestPatch(t *testing.T) {
	plain := annotated()
	delete(plain.Annotations, podtarget.ProbesAnnotation)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string // the JSON patch; "" none
	}{
		{name: "annotation, no gates", pod: annotated(), want: `[{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"probed.io/ready"}]}]`},
		{name: "annotation, another gate", pod: annotated("other.io/ready"), want: `[{"op":"add","path":"/spec/readinessGates/-","value":{"conditionType":"probed.io/ready"}}]`},
		{name: "annotation and the gate", pod: annotated("other.io/ready", podtarget.GateType)},
		{name: "no annotation", pod: plain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inject.Patch(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Patch = %s; want %s", got, tt.want)
			}
		})
	}
}

func review(t *testing.T, op admissionv1.Operation, resource string, object []byte) []byte {
	t.Helper()
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "req-1", Operation: op, Namespace: "shop",
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Object:   runtime.RawExtension{Raw: object},
		},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandler(t *testing.T) {
	pod, _ := json.Marshal(annotated())
	tests := []struct {
		name    string
		body    []byte
		status  int
		patched bool
		warned  bool
	}{
		{name: "pod created", body: review(t, admissionv1.Create, "pods", pod), status: 200, patched: true},
		{name: "pod updated", body: review(t, admissionv1.Update, "pods", pod), status: 200},
		{name: "not a pod", body: review(t, admissionv1.Create, "services", pod), status: 200},
		{name: "pod that does not decode", body: review(t, admissionv1.Create, "pods", []byte(`{"spec": 3}`)), status: 200, warned: true},
		{name: "not a review", body: []byte(`[]`), status: 400},
		{name: "too large", body: bytes.Repeat([]byte(" "), inject.MaxReviewBytes+1), status: 400},
	}
	h := inject.Handler(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, inject.Path, bytes.NewReader(tt.body)))
			if w.Code != tt.status {
				t.Fatalf("status %d; want %d (%s)", w.Code, tt.status, w.Body)
			}
			if tt.status != 200 {
				return
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			r := out.Response
			if r == nil || r.UID != "req-1" || !r.Allowed {
				t.Fatalf("response %+v; want the request's UID, allowed", r)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
				t.Errorf("review %s %s", out.APIVersion, out.Kind)
			}
			if got := r.Patch != nil; got != tt.patched {
				t.Errorf("patched %v; want %v (%s)", got, tt.patched, r.Patch)
			}
			if tt.patched && (r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch) {
				t.Errorf("patch type %v", r.PatchType)
			}
			if got := len(r.Warnings) > 0; got != tt.warned {
				t.Errorf("warnings %q", r.Warnings)
			}
		})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, inject.Path, nil))
	if w.Code != http.StatusMethodNotAllowed || !strings.Contains(w.Body.String(), "POST") {
		t.Errorf("GET: %d %s", w.Code, w.Body)
	}
}
