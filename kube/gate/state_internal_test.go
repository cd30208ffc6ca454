package gate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestConditionSaysNothingOfTheAnswer: whatever message the probe had,
// the condition is one of the fixed sentences.
func TestConditionSaysNothingOfTheAnswer(t *testing.T) {
	const answer = "expected body \"ok\", got \"SECRET internal service banner\""
	tests := []struct {
		name   string
		events []*probev1.Event
		want   condition
	}{
		{
			name:   "never probed",
			events: []*probev1.Event{{Kind: probev1.EventKind_EVENT_KIND_CREATED, Started: true}},
			want:   condition{status: corev1.ConditionFalse, reason: ReasonNotReady, message: "the readiness probe has not succeeded yet"},
		},
		{
			name: "readiness failed",
			events: []*probev1.Event{{Kind: probev1.EventKind_EVENT_KIND_TRANSITION, ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS,
				To: probev1.Result_RESULT_FAILURE, Message: answer, Started: true}},
			want: condition{status: corev1.ConditionFalse, reason: ReasonNotReady, message: "the readiness probe failed (its message is in probed's target status)"},
		},
		{
			name: "startup unknown",
			events: []*probev1.Event{{Kind: probev1.EventKind_EVENT_KIND_TRANSITION, ProbeType: probev1.ProbeType_PROBE_TYPE_STARTUP,
				To: probev1.Result_RESULT_UNKNOWN, Message: answer}},
			want: condition{status: corev1.ConditionFalse, reason: ReasonNotStarted, message: "the startup probe could not run (its message is in probed's target status)"},
		},
		{
			name: "ready",
			events: []*probev1.Event{{Kind: probev1.EventKind_EVENT_KIND_TRANSITION, ProbeType: probev1.ProbeType_PROBE_TYPE_READINESS,
				To: probev1.Result_RESULT_SUCCESS, Message: answer, Started: true, Ready: true}},
			want: condition{status: corev1.ConditionTrue, reason: ReasonReady},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s targetState
			for _, ev := range tt.events {
				s = s.apply(ev)
			}
			got := s.condition()
			if got != tt.want {
				t.Errorf("condition %+v; want %+v", got, tt.want)
			}
			if strings.Contains(got.message, "SECRET") {
				t.Errorf("condition %q quotes the answer", got.message)
			}
		})
	}
}

func TestGateMistake(t *testing.T) {
	tests := []struct {
		name      string
		annotated bool
		gates     []string
		want      string
	}{
		{name: "gate and annotation", annotated: true, gates: []string{podtarget.GateType}},
		{name: "annotation, no gate", annotated: true, want: ReasonMissingGate},
		{name: "annotation, other gates", annotated: true, gates: []string{"other.io/ready"}, want: ReasonMissingGate},
		{name: "typo", annotated: true, gates: []string{"probed.io/redy"}, want: ReasonUnknownGate},
		{name: "typo beside the gate", gates: []string{podtarget.GateType, "probed.io/Ready"}, want: ReasonUnknownGate},
		{name: "neither"},
		{name: "gate without annotation", gates: []string{podtarget.GateType}}, // its condition says InvalidProbes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			if tt.annotated {
				pod.Annotations = map[string]string{podtarget.ProbesAnnotation: "{}"}
			}
			for _, g := range tt.gates {
				pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: corev1.PodConditionType(g)})
			}
			if got, detail := gateMistake(pod); got != tt.want || (got != "" && detail == "") {
				t.Errorf("gateMistake = %q, %q; want %q", got, detail, tt.want)
			}
		})
	}
}
