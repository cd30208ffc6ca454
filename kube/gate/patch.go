package gate

import (
	"context"
	"errors"
	"strings"

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
// controller knows, patching it only when it differs, and at most once
// per MinInterval: a pod whose condition was written less than
// MinInterval ago is checked again when the interval ends, with the state
// it has then (the latest wins; a flip and its flip back cost nothing).
// A delayed key waits in the queue's timer, not in a worker, so pods that
// flip fast never hold the workers steady ones need.
func (c *Controller) syncCondition(ctx context.Context, key string) error {
	pod, ok := c.pods.get(key)
	if !ok || !podtarget.OptedIn(pod) || !c.pods.inScope(pod.Namespace) {
		return nil
	}
	want, ok := c.wanted(pod)
	if !ok {
		return nil
	}
	now := c.opts.Clock.Now()
	cur, has := conditionOf(pod)
	c.mu.Lock()
	w, wrote := c.written[key]
	if wrote && (w.uid != string(pod.UID) || w.cond.same(cur) || !now.Before(w.expires)) {
		// The cache has caught up with the last patch (or the pod is
		// new, or the expectation expired: the cache is the truth).
		delete(c.written, key)
		wrote = false
	}
	last, patchedBefore := c.lastWrite[key]
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
		cur, has = &w.at, true
	}
	if !has && want.status == corev1.ConditionFalse && (want.reason == ReasonNotReady || want.reason == ReasonNotStarted) {
		// kubelet counts a missing condition as not ready: a pod that was
		// never ready gets no patch until it is (or until something is
		// wrong), so a start costs one patch.
		return nil
	}
	if patchedBefore {
		if wait := last.Add(c.opts.MinInterval).Sub(now); wait > 0 {
			c.opts.Metrics.damped.Inc()
			c.queue.AddAfter(key, wait)
			return nil
		}
	}
	patch, at, err := want.patch(pod, cur, now)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: c.opts.Owner}, "status")
	switch {
	case apierrors.IsNotFound(err), isUIDMismatch(err):
		// Deleted, or replaced by a pod of the same name (the UID
		// precondition): its own events follow.
		c.opts.Metrics.patched(want.status, nil, true)
		return nil
	case err != nil:
		c.opts.Metrics.patched(want.status, err, false)
		return err
	}
	c.opts.Metrics.patched(want.status, nil, false)
	c.mu.Lock()
	c.written[key] = written{uid: string(pod.UID), cond: want, at: at, expires: now.Add(c.opts.ExpectationTTL)}
	c.lastWrite[key] = now
	c.mu.Unlock()
	// Checked again when the expectation ends, in case the cache never
	// shows this write (another writer replaced it at once).
	c.queue.AddAfter(key, c.opts.ExpectationTTL)
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
	if v, ok := c.refusedLocked(pod); ok {
		return condition{status: corev1.ConditionFalse, reason: v.reason, message: bound(v.detail)}, true
	}
	if cf, ok := c.conflicts[key]; ok && cf.uid == string(pod.UID) {
		return condition{status: corev1.ConditionFalse, reason: ReasonConflict, message: bound("probed's target " + key + ": " + cf.message)}, true
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

// isUIDMismatch reports whether a patch failed only on its UID
// precondition (the patch's metadata.uid is not the pod's: the pod was
// replaced by one of the same name). Any other invalid patch is an
// error, logged and retried.
func isUIDMismatch(err error) bool {
	if !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if apierrors.IsConflict(err) {
		// A precondition of an update (metav1.Preconditions) is a
		// Conflict naming the UID.
		return d != nil && containsUID(status.Status().Message)
	}
	if d == nil || len(d.Causes) == 0 {
		return false
	}
	for _, cause := range d.Causes {
		if cause.Field != "metadata.uid" {
			return false
		}
	}
	return true
}

func containsUID(msg string) bool {
	return strings.Contains(msg, "Precondition failed: UID in precondition")
}
