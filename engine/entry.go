package engine

import (
	"sync"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/wheel"
)

// entry is one registered target's runtime state. Every registered target
// has one; only an owned one (see Own) has runners and is probed.
type entry struct {
	name string
	// client is Status.Client, which never changes: readable without mu
	// (the registry's per-client counts read it under Engine.mu).
	client string
	// shard is the target's shard (Ownership.ShardOf); guarded by
	// Engine.own, not mu.
	shard int

	mu   sync.Mutex // guards everything below
	spec *target.Spec
	// rec is the status as last committed (or loaded, or followed): the
	// record the view publishes, shared with it, so that a target holds
	// one copy of its status, a compact one. status, when set, is the
	// decided durable status, ahead of rec until committed (see edit):
	// read the current status through the accessors below.
	rec    *record
	status *Status
	// built is the Target last built from status (changeLocked), until
	// status changes: once committed, adopt makes its record en's.
	built   *Target
	runners [probe.NumTypes]*runner
	// owned: this engine probes the target (its runners exist) and drives
	// its drain.
	owned bool
	// wasReady: the target has been ready since its creation or reset (for
	// the cold-start metric).
	wasReady bool
	// removed: deleted or lost; late outcomes are dropped.
	removed bool
	drain   *wheel.Timer
}

// editLocked returns en's status for writing, made from its record first when
// it has not changed since its last commit (a record is immutable: it is
// published); en.mu held.
func (en *entry) editLocked() *Status {
	en.built = nil
	if en.status == nil {
		s := en.rec.status()
		en.status = &s
	}
	return en.status
}

// currentLocked returns a copy of en's status; en.mu held.
func (en *entry) currentLocked() Status {
	if en.status != nil {
		return *en.status
	}
	return en.rec.status()
}

// shareLocked makes r en's status (r is published or loaded: en makes a Status
// of it before its next write); en.mu held or en not yet visible.
func (en *entry) shareLocked(r *record) {
	en.spec, en.rec, en.status, en.built = r.spec, r, nil, nil
}

// adopt shares c's record, c being just committed, if en's status has not
// changed since c's target was built from it. Not before the commit: the
// store sets the revision in the target's status then.
func (en *entry) adopt(c *Change) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.built == c.Target {
		en.rec, en.status, en.built = c.record(), nil, nil
	}
}

// The accessors of en's current status; en.mu held.

func (en *entry) phase() Phase {
	if en.status != nil {
		return en.status.Phase
	}
	return en.rec.phase()
}

func (en *entry) started() bool {
	if en.status != nil {
		return en.status.Started()
	}
	return en.rec.Started()
}

func (en *entry) ready() bool {
	if en.status != nil {
		return en.status.Ready()
	}
	return en.rec.Ready()
}

func (en *entry) startTime() time.Time {
	if en.status != nil {
		return en.status.StartTime
	}
	return en.rec.started
}

func (en *entry) deleteTime() time.Time {
	if en.status != nil {
		return en.status.DeleteTime
	}
	return en.rec.deleteTime()
}

func (en *entry) grace() *time.Duration {
	if en.status != nil {
		return en.status.DeletionGracePeriod
	}
	return en.rec.grace()
}

// probeState returns the published result of probe typ and whether it
// has initialized.
func (en *entry) probeState(typ probe.Type) (probe.Result, bool) {
	if en.status != nil {
		p := &en.status.Probes[typ]
		return p.Result, p.HasInitialized
	}
	return en.rec.probe(typ)
}
