package gate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/probed/probed/client"
	"github.com/probed/probed/kube/podtarget"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// watch follows the events of the controller's targets and notes each
// target's state, queueing its pod's condition for a check. While probed
// cannot be reached the states stay as they were, so the pods keep their
// last conditions; the client resumes the watch by revision. It returns
// the watch's terminal error (credentials refused).
func (c *Controller) watch(ctx context.Context) error {
	var snapshot map[string]bool // names of the snapshot being received
	ch := c.prober.Watch(ctx,
		client.WithLabels(map[string]string{podtarget.LabelOwner: c.opts.Owner}),
		// Back within half a second of probed (with the channel's own
		// reconnection, see Reconnect).
		client.WithBackoff(25*time.Millisecond, 250*time.Millisecond),
		client.WithStateFunc(func(s client.WatchState) {
			c.opts.Metrics.setConnected(s.Connected, s.Err)
		}))
	for resp := range ch {
		if resp.Err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the watch ended because the controller stops
			}
			return fmt.Errorf("watch probed: %w", resp.Err)
		}
		c.opts.Metrics.setConnected(true, nil)
		if resp.Resynced || (resp.Snapshot && snapshot == nil) {
			snapshot = map[string]bool{}
		}
		for _, ev := range resp.Events {
			if snapshot != nil {
				snapshot[ev.GetName()] = true
			}
			c.event(ev)
		}
		if resp.SnapshotComplete && snapshot != nil {
			c.endSnapshot(snapshot)
			snapshot = nil
		}
	}
	return nil
}

// event notes one event.
func (c *Controller) event(ev *probev1.Event) {
	name := ev.GetName()
	c.mu.Lock()
	if ev.GetKind() == probev1.EventKind_EVENT_KIND_DELETED {
		c.dropStateLocked(name)
	} else {
		if _, known := c.states[name]; !known {
			c.nsTargets[podNamespace(name)]++
		}
		c.states[name] = c.states[name].apply(ev)
	}
	c.mu.Unlock()
	c.opts.Metrics.events.Inc()
	if ev.GetKind() == probev1.EventKind_EVENT_KIND_TRANSITION &&
		ev.GetProbeType() == probev1.ProbeType_PROBE_TYPE_LIVENESS &&
		ev.GetTo() == probev1.Result_RESULT_FAILURE {
		c.livenessFailed(name)
	}
	c.queue.Add(name) // the target's name is its pod's key
}

// endSnapshot drops the states of targets a complete snapshot no longer
// has, and marks the states complete: conditions can be written.
func (c *Controller) endSnapshot(names map[string]bool) {
	c.mu.Lock()
	var gone []string
	for name := range c.states {
		if !names[name] {
			c.dropStateLocked(name)
			gone = append(gone, name)
		}
	}
	c.synced = true
	c.mu.Unlock()
	for _, name := range gone {
		c.queue.Add(name)
	}
	// A target missing from probed (e.g. probed lost its data) is
	// registered again.
	c.markAllDirty()
}

// livenessFailed reports a liveness failure as an Event on the pod: probed
// restarts nothing, so people and tools learn it from the pod. The Event
// says no more than the condition would (see targetState.condition): the
// probe's message quotes the answer, and Events are as readable as pods.
func (c *Controller) livenessFailed(name string) {
	pod, ok := c.pods.get(name)
	if !ok {
		return
	}
	c.recorder.Event(pod, corev1.EventTypeWarning, ReasonLivenessFailed, summary("liveness", probev1.Result_RESULT_FAILURE))
}

// dropStateLocked forgets the state of the target name. c.mu is held.
func (c *Controller) dropStateLocked(name string) {
	if _, known := c.states[name]; !known {
		return
	}
	delete(c.states, name)
	ns := podNamespace(name)
	if c.nsTargets[ns]--; c.nsTargets[ns] <= 0 {
		delete(c.nsTargets, ns)
	}
}
