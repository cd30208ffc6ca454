package gate

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// verdict is a pod's target, or why it has none, for one content of the
// pod: its UID and the sum of what its target is computed from
// (targetSum). A pod whose content is unchanged is neither validated nor
// warned about again, and a pod refused (by the controller's validation,
// which is probed's own, or by probed) is never sent again until its
// content changes: one bad pod costs its namespace's set nothing.
type verdict struct {
	uid    string
	sum    [sha256.Size]byte
	target *probev1.Target // nil: refused
	reason string          // why refused
	detail string
}

// targetSum hashes what a pod's target is computed from, besides its UID
// (under which the container ports and the name do not change): its IP
// and the annotations the target reads.
func targetSum(pod *corev1.Pod) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(pod.Status.PodIP))
	for _, k := range podtarget.Annotations {
		v, ok := pod.Annotations[k]
		h.Write([]byte{0})
		if ok {
			h.Write([]byte{1})
			h.Write([]byte(v))
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// verdictLocked returns the pod's verdict, computing it (and sending the
// Warning Event of a refusal) unless the last one was for the same
// content; fresh says it was computed now. c.mu is held.
func (c *Controller) verdictLocked(pod *corev1.Pod) (v verdict, fresh bool) {
	key := podtarget.Name(pod.Namespace, pod.Name)
	sum := targetSum(pod)
	if v, ok := c.verdicts[key]; ok && v.uid == string(pod.UID) && v.sum == sum {
		return v, false
	}
	v = verdict{uid: string(pod.UID), sum: sum}
	t, err := podtarget.Target(pod, c.opts.Owner)
	if inv, ok := errors.AsType[*podtarget.InvalidError](err); ok {
		v.reason, v.detail = ReasonInvalidProbes, inv.Error()
		c.warnLocked(pod, v.reason, v.detail)
		c.opts.Metrics.refused.Inc()
	} else {
		v.target = t
	}
	c.verdicts[key] = v
	return v, true
}

// refuseLocked records that probed refused the target of pod as it is
// now, for detail. c.mu is held.
func (c *Controller) refuseLocked(pod *corev1.Pod, detail string) {
	key := podtarget.Name(pod.Namespace, pod.Name)
	c.verdicts[key] = verdict{uid: string(pod.UID), sum: targetSum(pod), reason: ReasonInvalidProbes, detail: detail}
	c.warnLocked(pod, ReasonInvalidProbes, detail)
	c.opts.Metrics.refused.Inc()
}

// refusedLocked returns why the pod has no target, if it has none for
// its current content. c.mu is held.
func (c *Controller) refusedLocked(pod *corev1.Pod) (verdict, bool) {
	v, ok := c.verdicts[podtarget.Name(pod.Namespace, pod.Name)]
	if !ok || v.uid != string(pod.UID) || v.target != nil || v.sum != targetSum(pod) {
		return verdict{}, false
	}
	return v, true
}

// desiredIn returns the targets of namespace's opted-in pods that have
// an IP, are not terminating nor finished, and whose verdict is a
// target, sorted by name; and those pods by target name.
func (c *Controller) desiredIn(namespace string) ([]*probev1.Target, map[string]*corev1.Pod) {
	var targets []*probev1.Target
	pods := map[string]*corev1.Pod{}
	var changed []string
	inScope := c.pods.inScope(namespace)
	c.mu.Lock()
	for _, pod := range c.pods.inNamespace(namespace) {
		if !inScope || !podtarget.OptedIn(pod) || pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || isFinished(pod) {
			continue
		}
		key := podtarget.Name(pod.Namespace, pod.Name)
		v, fresh := c.verdictLocked(pod)
		if fresh {
			changed = append(changed, key) // a refusal's condition changes with it
		}
		if v.target == nil {
			continue
		}
		targets = append(targets, v.target)
		pods[key] = pod
	}
	c.mu.Unlock()
	for _, k := range changed {
		c.queue.Add(k)
	}
	slices.SortFunc(targets, func(a, b *probev1.Target) int { return strings.Compare(a.GetName(), b.GetName()) })
	return targets, pods
}

func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
