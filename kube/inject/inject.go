// Package inject is probed-kube's mutating admission webhook: it adds the
// readiness gate probed.io/ready to the pods created with the annotation
// probed.io/probes, in the namespaces the webhook's configuration selects
// (the chart's selects those labelled probed.io/readiness-gate-inject=enabled),
// so that nobody has to remember the gate. Every replica of probed-kube
// serves it, leading or not: with failurePolicy Ignore, a webhook served
// by the leader alone would silently skip the pods sent to the others.
package inject

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/kube/podtarget"
)

// Path is the webhook's URL path.
const Path = "/mutate-v1-pod"

// MaxReviewBytes bounds an AdmissionReview's body: the API server sends
// the whole pod, which etcd bounds at 1.5 MiB.
const MaxReviewBytes = 8 << 20

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// Handler serves the webhook at any path (mount it at Path): it answers
// every AdmissionReview v1 with allowed, and with a JSON patch adding the
// gate when Patch returns one. A review it cannot read is 400: the API
// server then applies the configuration's failurePolicy.
func Handler(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
		if err != nil {
			http.Error(w, "read the AdmissionReview: "+err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview v1 with a request", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		patch, err := requestPatch(review.Request)
		if err != nil {
			// Never in the way of a pod: allowed unchanged, and said so.
			resp.Warnings = []string{"probed-kube did not add the readiness gate " + podtarget.GateType + ": " + err.Error()}
			log.Warn("admission webhook: pod left unchanged", "namespace", review.Request.Namespace, "name", review.Request.Name, "err", err)
		} else if patch != nil {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
		}
		out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// requestPatch returns the patch of a review's pod, nil when the review
// is not the creation of a pod or the pod needs none.
func requestPatch(req *admissionv1.AdmissionRequest) ([]byte, error) {
	if req.Resource != podResource || req.SubResource != "" || req.Operation != admissionv1.Create {
		return nil, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return nil, fmt.Errorf("decode the pod: %w", err)
	}
	return Patch(&pod)
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Patch returns the JSON patch (RFC 6902) that adds the readiness gate
// probed.io/ready to pod, when pod has the probes annotation and lacks
// the gate; nil when it needs none (so a pod patched once is left as it
// is). It changes nothing else.
func Patch(pod *corev1.Pod) ([]byte, error) {
	if _, ok := pod.Annotations[podtarget.ProbesAnnotation]; !ok || podtarget.OptedIn(pod) {
		return nil, nil
	}
	gate := corev1.PodReadinessGate{ConditionType: podtarget.GateType}
	op := jsonPatchOp{Op: "add", Path: "/spec/readinessGates/-", Value: gate}
	if len(pod.Spec.ReadinessGates) == 0 {
		// "add" replaces an empty list given as [] too.
		op = jsonPatchOp{Op: "add", Path: "/spec/readinessGates", Value: []corev1.PodReadinessGate{gate}}
	}
	return json.Marshal([]jsonPatchOp{op})
}
