package gate

import (
	"context"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed/probed/kube/podtarget"
)

// nextCondition handles one pod key of the queue; false once the queue is
// shut down. The queue hands a key to one worker at a time and keeps the
// key's later additions as one, so at most one patch per pod is in flight
// and states that arrive meanwhile are coalesced into the next.
func (c *Controller) nextCondition(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.syncCondition(ctx, key)
	switch {
	case err == nil || ctx.Err() != nil:
		c.queue.Forget(key)
	case isForbidden(err):
		c.opts.Metrics.logf("patch %s: %v (probed-kube needs patch on pods/status)", key, err)
		c.queue.AddRateLimited(key)
	default:
		c.opts.Metrics.logf("patch %s: %v", key, err)
		c.queue.AddRateLimited(key)
	}
	return true
}

// syncCondition makes the pod's probed.io/ready condition say what the
// controller knows, patching it only when it differs.
func (c *Controller) syncCondition(ctx context.Context, key string) error {
	obj, ok, err := c.pods.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !podtarget.OptedIn(pod) {
		return nil
	}
	want, ok := c.wanted(pod)
	if !ok {
		return nil
	}
	cur, has := conditionOf(pod)
	c.mu.Lock()
	w, wrote := c.written[key]
	if wrote && (w.uid != string(pod.UID) || w.cond.same(cur)) {
		// The cache has caught up with the last patch (or the pod is new).
		delete(c.written, key)
		wrote = false
	}
	c.mu.Unlock()
	if wrote && w.cond == want {
		// Patched already; the cache has not caught up yet.
		return nil
	}
	if !wrote && want.same(cur) {
		return nil
	}
	if wrote {
		// The freshest status is the one patched last.
		cur = &corev1.PodCondition{Status: w.cond.status, LastTransitionTime: w.at}
		has = true
	}
	if !has && want.status == corev1.ConditionFalse && (want.reason == ReasonNotReady || want.reason == ReasonNotStarted) {
		// kubelet counts a missing condition as not ready: a pod that was
		// never ready gets no patch until it is (or until something is
		// wrong), so a start costs one patch.
		return nil
	}
	patch, err := want.patch(pod, cur, c.opts.Clock.Now())
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: c.opts.Owner}, "status")
	c.opts.Metrics.patched(want.status, err)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		// Deleted, or replaced by a pod of the same name (the UID
		// precondition): its own events follow.
		return nil
	case err != nil:
		return err
	}
	c.mu.Lock()
	c.written[key] = written{uid: string(pod.UID), cond: want, at: transitionTime(patch)}
	c.mu.Unlock()
	return nil
}

// wanted is the condition the controller wants on pod; false when it
// knows nothing yet (no target state, or the watch's first snapshot is not
// complete), and the pod's condition is left as it is.
func (c *Controller) wanted(pod *corev1.Pod) (condition, bool) {
	key := podtarget.Name(pod.Namespace, pod.Name)
	if pod.DeletionTimestamp != nil {
		return condition{status: corev1.ConditionFalse, reason: ReasonTerminating, message: "the pod is terminating"}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bad, ok := c.invalid[key]; ok && bad.uid == string(pod.UID) {
		return condition{status: corev1.ConditionFalse, reason: bad.reason, message: bound(bad.detail)}, true
	}
	if !c.synced || pod.Status.PodIP == "" {
		return condition{}, false
	}
	s, ok := c.states[key]
	if !ok || s.uid != string(pod.UID) {
		return condition{}, false
	}
	return s.condition(), true
}

func isForbidden(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || (errors.As(err, &status) && status.Status().Code == 403)
}

// transitionTime reads back the lastTransitionTime a patch sets.
func transitionTime(patch []byte) metav1.Time {
	var p struct {
		Status struct {
			Conditions []struct {
				LastTransitionTime metav1.Time `json:"lastTransitionTime"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(patch, &p) != nil || len(p.Status.Conditions) == 0 {
		return metav1.Time{}
	}
	return p.Status.Conditions[0].LastTransitionTime
}
