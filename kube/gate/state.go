package gate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// targetState is what probed last said about one pod's target.
type targetState struct {
	uid         string // the pod UID the target was last applied for
	started     bool
	ready       bool
	terminating bool
	// result is the outcome of the last startup or readiness transition
	// (RESULT_UNSPECIFIED before any): all the condition says of why the
	// pod is not ready (see condition).
	result probev1.Result
}

// apply updates s with one event.
func (s targetState) apply(ev *probev1.Event) targetState {
	if t := ev.GetTarget(); t != nil {
		s.uid = t.GetLabels()[podtarget.LabelUID]
		s.terminating = t.GetStatus().GetPhase() == probev1.Phase_PHASE_TERMINATING
	}
	s.started, s.ready = ev.GetStarted(), ev.GetReady()
	switch ev.GetKind() {
	case probev1.EventKind_EVENT_KIND_TERMINATING:
		s.terminating = true
	case probev1.EventKind_EVENT_KIND_TRANSITION:
		if pt := ev.GetProbeType(); pt == probev1.ProbeType_PROBE_TYPE_READINESS || pt == probev1.ProbeType_PROBE_TYPE_STARTUP {
			s.result = ev.GetTo()
		}
	case probev1.EventKind_EVENT_KIND_RESET, probev1.EventKind_EVENT_KIND_CREATED:
		s.result = probev1.Result_RESULT_UNSPECIFIED
	}
	return s
}

// condition is the pod's condition as s says. Its message is one of a
// few fixed sentences: never the probe's own message, which quotes what
// the probed address answered (a status line, the start of a body), and
// conditions are readable by anyone who may read the pod. The probe's
// message stays in probed (the target's status), behind probed's own
// authorization.
func (s targetState) condition() condition {
	switch {
	case s.ready:
		return condition{status: corev1.ConditionTrue, reason: ReasonReady}
	case s.terminating:
		return condition{status: corev1.ConditionFalse, reason: ReasonTerminating, message: "the target is terminating"}
	case !s.started:
		return condition{status: corev1.ConditionFalse, reason: ReasonNotStarted, message: summary("startup", s.result)}
	default:
		return condition{status: corev1.ConditionFalse, reason: ReasonNotReady, message: summary("readiness", s.result)}
	}
}

// summary is the condition's message for a probe (of kind "startup" or
// "readiness") that has not succeeded, after a transition to result.
func summary(kind string, result probev1.Result) string {
	const details = " (its message is in probed's target status)"
	switch result {
	case probev1.Result_RESULT_FAILURE:
		return "the " + kind + " probe failed" + details
	case probev1.Result_RESULT_UNKNOWN:
		return "the " + kind + " probe could not run" + details
	default:
		return "the " + kind + " probe has not succeeded yet"
	}
}
