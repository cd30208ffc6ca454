package gate

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Backoff of a failed apply.
const (
	minApplyBackoff = 100 * time.Millisecond
	maxApplyBackoff = 5 * time.Second
)

// syncTargets applies the target set each time a pod changes (changes that
// arrive during an apply are coalesced into the next one), and every
// Resync. A failed apply is retried with a backoff; nothing is pruned by
// a failed apply.
func (c *Controller) syncTargets(ctx context.Context) error {
	resync := c.opts.Clock.NewTicker(c.opts.Resync)
	defer resync.Stop()
	backoff := time.Duration(0)
	c.markDirty() // the first apply converges what changed while down
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.dirty:
		case <-resync.Chan():
		}
		err := c.applyOnce(ctx)
		c.opts.Metrics.applied(err)
		switch {
		case err == nil:
			backoff = 0
			continue
		case ctx.Err() != nil:
			return nil
		case isFatal(err):
			return err
		}
		backoff = min(max(2*backoff, minApplyBackoff), maxApplyBackoff)
		c.opts.Metrics.logf("apply targets: %v (retry in %v)", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-c.opts.Clock.After(backoff):
			c.markDirty()
		}
	}
}

// isFatal reports whether probed refuses the controller itself.
func isFatal(err error) bool {
	return errors.Is(err, client.ErrUnauthenticated) || errors.Is(err, client.ErrPermissionDenied)
}

// maxInvalidRounds bounds the applies of one sync that each drop the
// targets probed found invalid.
const maxInvalidRounds = 3

// applyOnce computes the desired targets from the pod cache and applies
// them.
func (c *Controller) applyOnce(ctx context.Context) error {
	desired, pods := c.desired()
	for range maxInvalidRounds {
		resp, err := c.prober.Apply(ctx, c.opts.Owner, map[string]string{podtarget.LabelOwner: c.opts.Owner}, desired)
		if inv, ok := errors.AsType[*client.InvalidError](err); ok {
			bad := c.rejected(inv, desired, pods)
			if len(bad) == 0 {
				return err
			}
			desired = slices.DeleteFunc(desired, func(t *probev1.Target) bool { return bad[t.GetName()] })
			continue
		}
		if err != nil {
			return err
		}
		c.afterApply(ctx, resp, desired, pods)
		return nil
	}
	return errors.New("apply targets: probed keeps finding targets invalid")
}

// desired returns the targets of the opted-in pods that have an IP and are
// not terminating, and those pods by target name. Pods whose annotation
// is bad are recorded (their condition says so) and left out.
func (c *Controller) desired() ([]*probev1.Target, map[string]*corev1.Pod) {
	var targets []*probev1.Target
	pods := map[string]*corev1.Pod{}
	var changed []string
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		for _, k := range changed {
			c.queue.Add(k)
		}
	}()
	seen := map[string]bool{}
	for _, obj := range c.pods.List() {
		pod := obj.(*corev1.Pod)
		if !podtarget.OptedIn(pod) || pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || isFinished(pod) {
			continue
		}
		key := podtarget.Name(pod.Namespace, pod.Name)
		seen[key] = true
		t, err := podtarget.Target(pod, c.opts.Owner)
		if inv, ok := errors.AsType[*podtarget.InvalidError](err); ok {
			if prev := c.invalid[key]; prev.uid != string(pod.UID) || prev.detail != inv.Error() {
				c.invalid[key] = badPod{uid: string(pod.UID), reason: ReasonInvalidProbes, detail: inv.Error()}
				c.warnLocked(pod, ReasonInvalidProbes, inv.Error())
				changed = append(changed, key)
			}
			continue
		}
		if _, was := c.invalid[key]; was {
			delete(c.invalid, key)
			changed = append(changed, key)
		}
		targets = append(targets, t)
		pods[key] = pod
	}
	for key := range c.invalid {
		if !seen[key] {
			delete(c.invalid, key)
		}
	}
	slices.SortFunc(targets, func(a, b *probev1.Target) int { return strings.Compare(a.GetName(), b.GetName()) })
	c.opts.Metrics.targets.Set(float64(len(targets)))
	return targets, pods
}

func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// violationIndex matches the index of a desired target in a field
// violation of ApplyTargets ("targets[3].readinessProbe...").
var violationIndex = regexp.MustCompile(`^targets\[(\d+)\]\.?(.*)$`)

// rejected records the pods whose targets probed found invalid, with an
// Event naming the fields, and returns their names.
func (c *Controller) rejected(inv *client.InvalidError, desired []*probev1.Target, pods map[string]*corev1.Pod) map[string]bool {
	details := map[string][]string{}
	for _, v := range inv.Violations {
		m := violationIndex.FindStringSubmatch(v.Field)
		if m == nil {
			continue
		}
		i, err := strconv.Atoi(m[1])
		if err != nil || i >= len(desired) {
			continue
		}
		name := desired[i].GetName()
		details[name] = append(details[name], annotationField(m[2])+": "+v.Description)
	}
	c.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(details)) {
		pod := pods[name]
		detail := strings.Join(details[name], "; ")
		c.invalid[name] = badPod{uid: string(pod.UID), reason: ReasonInvalidProbes, detail: detail}
		c.warnLocked(pod, ReasonInvalidProbes, detail)
	}
	c.mu.Unlock()
	bad := map[string]bool{}
	for name := range details {
		bad[name] = true
		c.queue.Add(name)
	}
	return bad
}

// annotationField names a field of a target as the annotation's field.
func annotationField(field string) string {
	return "metadata.annotations[" + podtarget.ProbesAnnotation + "]." + field
}

// afterApply records conflicts and resets the targets whose container
// restarted (or whose pod was replaced under the same name).
func (c *Controller) afterApply(ctx context.Context, resp *probev1.ApplyTargetsResponse, desired []*probev1.Target, pods map[string]*corev1.Pod) {
	created := map[string]bool{}
	for _, n := range resp.GetCreated() {
		created[n] = true
	}
	c.mu.Lock()
	for _, cf := range resp.GetConflicts() {
		if pod := pods[cf.GetName()]; pod != nil {
			c.invalid[cf.GetName()] = badPod{uid: string(pod.UID), reason: ReasonConflict, detail: cf.GetMessage()}
			c.warnLocked(pod, ReasonConflict, "probed's target "+cf.GetName()+": "+cf.GetMessage())
		}
	}
	var reset []string
	for _, t := range desired {
		name, uid := t.GetName(), t.GetLabels()[podtarget.LabelUID]
		prev, had := c.applied[name]
		if !created[name] && (c.resets[name] || (had && prev != uid)) {
			reset = append(reset, name)
		}
		delete(c.resets, name)
		c.applied[name] = uid
	}
	for name := range c.applied {
		if pods[name] == nil {
			delete(c.applied, name)
		}
	}
	c.mu.Unlock()
	for _, cf := range resp.GetConflicts() {
		c.queue.Add(cf.GetName())
	}
	for _, name := range reset {
		if _, err := c.prober.Reset(ctx, name); err != nil && !errors.Is(err, client.ErrNotFound) {
			c.opts.Metrics.logf("reset %s: %v", name, err)
		}
	}
}
