package engine

import (
	"sync"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/wheel"
)

// entry is one registered target's runtime state. Every registered target
// has one; only an owned one (see Own) has runners and is probed.
type entry struct {
	name string

	mu   sync.Mutex // guards everything below
	spec *target.Spec
	// status is the decided durable status, ahead of the published one
	// until committed. It is the Status of the last Target built for a
	// change (or loaded) while shared is set, so that a target holds one
	// copy of its status, not two: read it freely, write it only through
	// edit.
	status  *Status
	shared  bool
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

// edit returns en's status for writing, copying it first when it is the
// status of a built Target (which is immutable once built); en.mu held.
func (en *entry) edit() *Status {
	if en.shared {
		c := *en.status
		en.status, en.shared = &c, false
	}
	return en.status
}

// share makes t's status en's (t is built or published: en copies it
// before its next write); en.mu held or en not yet visible.
func (en *entry) share(t *Target) {
	en.spec, en.status, en.shared = t.Spec, &t.Status, true
}
