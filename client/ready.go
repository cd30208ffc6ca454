package client

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// WaitReady returns the target as soon as it is ready: at once when it
// already is, otherwise when an event says it became ready. It watches the
// target (a snapshot of its current state, then its events), so it costs
// one stream and no polling, and it survives reconnections like Watch.
//
// It fails with ErrNotFound when the target does not exist, or is deleted
// (becomes TERMINATING, which can never be ready again) while waiting, and
// with ctx's error when ctx is done first. It is the call a proxy makes to
// hold a request until its backend can take it.
//
// opts may tune the watch's reconnections (WithBackoff, WithStateFunc);
// options that select events are ignored.
func (c *Client) WaitReady(ctx context.Context, name string, opts ...WatchOption) (*probev1.Target, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts = append(slices.Clone(opts), func(o *watchOptions) {
		o.since, o.names, o.labels, o.kinds = 0, []string{name}, nil, nil
	})
	var cur *probev1.Target // the target as of the last event
	for resp := range c.Watch(wctx, opts...) {
		if resp.Err != nil {
			return nil, resp.Err
		}
		if resp.Resynced {
			cur = nil
		}
		for _, ev := range resp.Events {
			if ev.GetName() != name {
				continue
			}
			cur = project(cur, ev)
			if isTerminating(ev, cur) {
				return nil, fmt.Errorf("target %q is being deleted: %w", name, ErrNotFound)
			}
			if !ev.GetReady() {
				continue
			}
			if cur == nil {
				// A change to a target the watch has not shown whole:
				// cannot happen after a snapshot, but read it to be sure.
				return c.Get(ctx, name)
			}
			return cur, nil
		}
		if resp.SnapshotComplete && cur == nil {
			return nil, fmt.Errorf("target %q: %w", name, ErrNotFound)
		}
	}
	return nil, ctx.Err()
}

func isTerminating(ev *probev1.Event, cur *probev1.Target) bool {
	switch ev.GetKind() {
	case probev1.EventKind_EVENT_KIND_TERMINATING, probev1.EventKind_EVENT_KIND_DELETED:
		return true
	}
	return cur.GetStatus().GetPhase() == probev1.Phase_PHASE_TERMINATING
}

// project returns the target after ev, given the target before it (nil
// when unknown). Events that carry the whole target replace it; probe
// events update the status they are about.
func project(cur *probev1.Target, ev *probev1.Event) *probev1.Target {
	if t := ev.GetTarget(); t != nil {
		return t
	}
	if cur == nil {
		return nil
	}
	t := proto.CloneOf(cur)
	if t.Status == nil {
		t.Status = &probev1.TargetStatus{}
	}
	st := t.Status
	st.Started, st.Ready, st.Live = ev.GetStarted(), ev.GetReady(), ev.GetLive()
	st.Revision = ev.GetRevision()
	var ps *probev1.ProbeStatus
	switch ev.GetProbeType() {
	case probev1.ProbeType_PROBE_TYPE_STARTUP:
		ps = st.Startup
	case probev1.ProbeType_PROBE_TYPE_LIVENESS:
		ps = st.Liveness
	case probev1.ProbeType_PROBE_TYPE_READINESS:
		ps = st.Readiness
	}
	if ps == nil {
		return t
	}
	switch ev.GetKind() {
	case probev1.EventKind_EVENT_KIND_TRANSITION:
		ps.Result = ev.GetTo()
		ps.LastTransitionTime = ev.GetTime()
		ps.LastMessage = ev.GetMessage()
		ps.LastLatency = ev.GetLatency()
		ps.LastProbeTime = ev.GetTime()
		if ev.GetTo() == probev1.Result_RESULT_SUCCESS {
			ps.HasInitialized = true
		}
	case probev1.EventKind_EVENT_KIND_INITIALIZED:
		ps.HasInitialized = true
	}
	return t
}
