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
	minApplyBackoff = 50 * time.Millisecond
	maxApplyBackoff = time.Second
)

// syncTargets applies the set of each namespace whose pods changed
// (changes that arrive during an apply are coalesced into the next one),
// and every namespace's every Resync. A failed apply is retried with a
// backoff; nothing is pruned by a failed apply, and a namespace whose
// apply fails delays no other.
//
// Each namespace is one set: ApplyTargets with the controller's owner and
// the selector probed.io/controller=OWNER, probed.io/namespace=NAMESPACE,
// so it prunes only that namespace's targets, and a set is bounded by
// one namespace's pods (probed takes at most 20,000 targets per set).
func (c *Controller) syncTargets(ctx context.Context) error {
	resync := c.opts.Clock.NewTicker(c.opts.Resync)
	defer resync.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.dirty:
		case <-resync.Chan():
			c.markAllDirty()
			continue
		}
		if !c.watchSynced() {
			// Nothing is applied before probed's snapshot is in: then
			// every namespace is applied (endSnapshot), those whose
			// pods are gone included, once.
			continue
		}
		failed := false
		for _, ns := range c.takeDirty() {
			err := c.applyNamespace(ctx, ns)
			c.opts.Metrics.applied(err)
			switch {
			case err == nil:
				continue
			case ctx.Err() != nil:
				return nil
			case isFatal(err):
				return err
			}
			failed = true
			c.markDirtyQuiet(ns)
			c.opts.Metrics.logf("apply the targets of namespace %s: %v", ns, err)
		}
		if !failed {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, minApplyBackoff), maxApplyBackoff)
		select {
		case <-ctx.Done():
			return nil
		case <-c.opts.Clock.After(backoff):
			c.signal()
		}
	}
}

// watchSynced reports whether the watch's first snapshot is complete.
func (c *Controller) watchSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// takeDirty returns the namespaces to apply now, sorted, and clears them.
func (c *Controller) takeDirty() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allDirty {
		c.allDirty = false
		for _, ns := range c.pods.namespaceNames() {
			c.dirtyNS[ns] = true
		}
		for ns := range c.nsTargets {
			// A namespace whose pods are all gone still has targets
			// to prune.
			c.dirtyNS[ns] = true
		}
	}
	out := slices.Sorted(maps.Keys(c.dirtyNS))
	clear(c.dirtyNS)
	return out
}

// markDirtyQuiet marks namespace dirty without waking syncTargets (it
// retries after its backoff).
func (c *Controller) markDirtyQuiet(namespace string) {
	c.mu.Lock()
	c.dirtyNS[namespace] = true
	c.mu.Unlock()
}

// isFatal reports whether probed refuses the controller itself.
func isFatal(err error) bool {
	return errors.Is(err, client.ErrUnauthenticated) || errors.Is(err, client.ErrPermissionDenied)
}

// applyNamespace applies namespace's set. Targets probed refuses (field
// violations of targets[i]) are recorded as their pods' refusals and
// left out, and the rest applied again, as long as each round leaves
// some out: probed names at most 100 violations per refusal.
func (c *Controller) applyNamespace(ctx context.Context, namespace string) error {
	desired, pods := c.desiredIn(namespace)
	c.mu.Lock()
	known := c.nsTargets[namespace]
	c.mu.Unlock()
	if len(desired) == 0 && known == 0 {
		// Nothing to create and nothing to prune (a namespace of pods
		// that do not opt in): no call.
		return nil
	}
	selector := map[string]string{podtarget.LabelOwner: c.opts.Owner, podtarget.LabelNamespace: namespace}
	for {
		resp, err := c.prober.Apply(ctx, c.opts.Owner, selector, desired)
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
		c.afterApply(ctx, namespace, resp, desired, pods)
		return nil
	}
}

// violationIndex matches the index of a desired target in a field
// violation of ApplyTargets ("targets[3].readinessProbe...").
var violationIndex = regexp.MustCompile(`^targets\[(\d+)\](.*)$`)

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
		details[name] = append(details[name], podtarget.PodField(m[2])+": "+v.Description)
	}
	c.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(details)) {
		if pod := pods[name]; pod != nil {
			c.refuseLocked(pod, strings.Join(details[name], "; "))
		}
	}
	c.mu.Unlock()
	bad := map[string]bool{}
	for name := range details {
		bad[name] = true
		c.queue.Add(name)
	}
	return bad
}

// afterApply records the namespace's conflicts and resets the targets
// whose container restarted (or whose pod was replaced under the same
// name).
func (c *Controller) afterApply(ctx context.Context, namespace string, resp *probev1.ApplyTargetsResponse, desired []*probev1.Target, pods map[string]*corev1.Pod) {
	created := map[string]bool{}
	for _, n := range resp.GetCreated() {
		created[n] = true
	}
	var requeue []string
	c.mu.Lock()
	inConflict := map[string]bool{}
	for _, cf := range resp.GetConflicts() {
		pod := pods[cf.GetName()]
		if pod == nil {
			continue
		}
		inConflict[cf.GetName()] = true
		if prev, ok := c.conflicts[cf.GetName()]; !ok || prev.uid != string(pod.UID) {
			requeue = append(requeue, cf.GetName())
		}
		c.conflicts[cf.GetName()] = conflict{uid: string(pod.UID), message: cf.GetMessage()}
		c.warnLocked(pod, ReasonConflict, "probed's target "+cf.GetName()+": "+cf.GetMessage())
	}
	for name := range c.conflicts {
		if podNamespace(name) == namespace && !inConflict[name] {
			delete(c.conflicts, name)
			requeue = append(requeue, name)
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
		if podNamespace(name) == namespace && pods[name] == nil {
			delete(c.applied, name)
		}
	}
	c.opts.Metrics.targets.Set(float64(len(c.applied)))
	c.mu.Unlock()
	for _, name := range requeue {
		c.queue.Add(name)
	}
	for _, name := range reset {
		if _, err := c.prober.Reset(ctx, name); err != nil && !errors.Is(err, client.ErrNotFound) {
			c.opts.Metrics.logf("reset %s: %v", name, err)
		}
	}
}

// podNamespace is the namespace of a target name (a pod key).
func podNamespace(name string) string {
	ns, _, _ := strings.Cut(name, "/")
	return ns
}
