package gate

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed/probed/kube/podtarget"
)

// Reasons of the probed.io/ready condition.
const (
	// ReasonReady: probed says the pod is ready.
	ReasonReady = "Ready"
	// ReasonNotStarted: the startup probe has not succeeded yet.
	ReasonNotStarted = "NotStarted"
	// ReasonNotReady: the readiness probe fails.
	ReasonNotReady = "NotReady"
	// ReasonTerminating: the pod is being deleted.
	ReasonTerminating = "Terminating"
	// ReasonInvalidProbes: the pod's probes annotation is wrong; the
	// message and an Event name the fields.
	ReasonInvalidProbes = "InvalidProbes"
	// ReasonConflict: probed has a target by the pod's name that another
	// owner manages.
	ReasonConflict = "TargetConflict"
	// ReasonLivenessFailed is the reason of the Warning Event of a failed
	// liveness probe.
	ReasonLivenessFailed = "LivenessProbeFailed"
)

// MaxMessageBytes bounds the condition's message (an InvalidProbes one
// lists the annotation's bad fields).
const MaxMessageBytes = 256

// condition is the probed.io/ready condition the controller wants on a pod.
type condition struct {
	status  corev1.ConditionStatus
	reason  string
	message string
}

// conditionOf returns the pod's probed.io/ready condition, if any.
func conditionOf(pod *corev1.Pod) (*corev1.PodCondition, bool) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == podtarget.GateType {
			return &pod.Status.Conditions[i], true
		}
	}
	return nil, false
}

// same reports whether the pod's condition already says c.
func (c condition) same(cur *corev1.PodCondition) bool {
	return cur != nil && cur.Status == c.status && cur.Reason == c.reason && cur.Message == c.message
}

// patch returns the strategic merge patch of the pod's status that sets c
// and nothing else, and the condition it writes: the conditions list is
// merged by type, so kubelet's and everyone else's conditions stay. The
// pod's UID makes the patch fail on a pod of the same name created since.
// lastTransitionTime changes only when the status flips.
func (c condition) patch(pod *corev1.Pod, cur *corev1.PodCondition, now time.Time) ([]byte, corev1.PodCondition, error) {
	transition := metav1.NewTime(now)
	if cur != nil && cur.Status == c.status && !cur.LastTransitionTime.IsZero() {
		transition = cur.LastTransitionTime
	}
	written := corev1.PodCondition{
		Type:               podtarget.GateType,
		Status:             c.status,
		Reason:             c.reason,
		Message:            c.message,
		LastTransitionTime: transition,
	}
	// A map, not a PodCondition: its omitempty would leave out an empty
	// message, and the merge would keep the last one.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{
			"conditions": []map[string]any{{
				"type":               podtarget.GateType,
				"status":             c.status,
				"reason":             c.reason,
				"message":            c.message,
				"lastTransitionTime": transition,
			}},
		},
	})
	return patch, written, err
}

// bound cuts s to at most MaxMessageBytes, on a rune boundary, marking the
// cut with "...".
func bound(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
