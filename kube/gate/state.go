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
	// message is the last probe message of a startup or readiness
	// transition (why the pod is or is not ready).
	message string
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
			s.message = ev.GetMessage()
		}
	case probev1.EventKind_EVENT_KIND_RESET, probev1.EventKind_EVENT_KIND_CREATED:
		s.message = ""
	}
	return s
}

// condition is the pod's condition as s says.
func (s targetState) condition() condition {
	switch {
	case s.ready:
		return condition{status: corev1.ConditionTrue, reason: ReasonReady}
	case s.terminating:
		return condition{status: corev1.ConditionFalse, reason: ReasonTerminating, message: "the target is terminating"}
	case !s.started:
		return condition{status: corev1.ConditionFalse, reason: ReasonNotStarted, message: bound(orDefault(s.message, "the startup probe has not succeeded yet"))}
	default:
		return condition{status: corev1.ConditionFalse, reason: ReasonNotReady, message: bound(orDefault(s.message, "the readiness probe has not succeeded yet"))}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
