package gate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/kube/podtarget"
)

// Reasons of the Warning Events about a pod's readiness gates.
const (
	// ReasonMissingGate: the pod has the probes annotation but not the
	// readiness gate, so probed-kube ignores it (the webhook was not
	// there when it was created, or its namespace is not labelled for
	// it).
	ReasonMissingGate = "MissingReadinessGate"
	// ReasonUnknownGate: the pod lists a readiness gate under probed.io/
	// that is not probed.io/ready (a typo): nobody writes it, and the pod
	// would never become ready.
	ReasonUnknownGate = "UnknownReadinessGate"
)

// gatePrefix is the prefix of probed's condition types.
const gatePrefix = "probed.io/"

// checkGates sends a Warning Event when the pod's gates are a mistake,
// once per pod UID and mistake.
func (c *Controller) checkGates(pod *corev1.Pod) {
	reason, detail := gateMistake(pod)
	key := podtarget.Name(pod.Namespace, pod.Name)
	c.mu.Lock()
	if reason == "" {
		delete(c.mistakes, key)
		c.mu.Unlock()
		return
	}
	sig := string(pod.UID) + "\x00" + reason
	if c.mistakes[key] == sig {
		c.mu.Unlock()
		return
	}
	c.mistakes[key] = sig
	c.mu.Unlock()
	c.recorder.Event(pod, corev1.EventTypeWarning, reason, bound(detail))
}

// gateMistake returns what is wrong with the pod's readiness gates, if
// anything: a gate under probed.io/ that is not probed.io/ready, or the
// probes annotation without the gate.
func gateMistake(pod *corev1.Pod) (reason, detail string) {
	for _, g := range pod.Spec.ReadinessGates {
		t := string(g.ConditionType)
		if strings.HasPrefix(t, gatePrefix) && t != podtarget.GateType {
			return ReasonUnknownGate, fmt.Sprintf("readiness gate %q: probed-kube writes only %s, so the pod never becomes ready; list %s instead", t, podtarget.GateType, podtarget.GateType)
		}
	}
	if _, ok := pod.Annotations[podtarget.ProbesAnnotation]; ok && !podtarget.OptedIn(pod) {
		return ReasonMissingGate, fmt.Sprintf("the pod has the %s annotation but not the readiness gate %s, so probed-kube ignores it: add the gate to spec.readinessGates, or label the namespace %s=enabled so that it is added to new pods",
			podtarget.ProbesAnnotation, podtarget.GateType, podtarget.InjectLabel)
	}
	return "", ""
}
