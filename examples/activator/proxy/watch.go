package proxy

import (
	"errors"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// watchRetry is the pause before watching again after the watch ended
// with an error the client does not retry itself.
const watchRetry = time.Second

// watch follows the proxy's targets until Close, so that a backend whose
// readiness fails (or whose target is deleted) is held again.
func (p *Proxy) watch() {
	for p.ctx.Err() == nil {
		err := p.watchOnce()
		if err == nil || errors.Is(err, p.ctx.Err()) {
			return
		}
		p.opts.Logger.Warn("watching targets", "err", err)
		sleep(p.ctx, watchRetry)
	}
}

// watchOnce runs one client.Watch until it ends and returns its error.
func (p *Proxy) watchOnce() error {
	var seen map[string]bool // targets in the snapshot being received
	for r := range p.c.Watch(p.ctx, client.WithLabels(p.opts.Labels)) {
		if r.Err != nil {
			return r.Err
		}
		if r.Snapshot && seen == nil {
			seen = make(map[string]bool)
		}
		for _, ev := range r.Events {
			b := p.backends[ev.GetName()]
			if b == nil {
				continue
			}
			if r.Snapshot {
				seen[b.Name] = true
			}
			b.observe(ev.GetRevision(), ev.GetReady(), !isGone(ev))
		}
		if r.SnapshotComplete {
			// A target missing from a snapshot does not exist (as of
			// the snapshot's revision).
			for _, b := range p.backends {
				if !seen[b.Name] {
					b.observe(r.Revision, false, false)
				}
			}
			seen = nil
		}
	}
	return p.ctx.Err()
}

// isGone reports whether ev says its target is being deleted or is gone.
func isGone(ev *probev1.Event) bool {
	switch ev.GetKind() {
	case probev1.EventKind_EVENT_KIND_TERMINATING, probev1.EventKind_EVENT_KIND_DELETED:
		return true
	}
	return ev.GetTarget().GetStatus().GetPhase() == probev1.Phase_PHASE_TERMINATING
}
