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
	// client is Status.Client, which never changes: readable without mu
	// (the registry's per-client counts read it under Engine.mu).
	client string

	mu   sync.Mutex // guards everything below
	spec *target.Spec
	// status is the decided durable status, ahead of the published one
	// until committed. While shared is set it is the Status of a committed
	// (or loaded) Target, so that a target holds one copy of its status,
	// not two: read it freely, write it only through edit.
	status *Status
	shared bool
	// built is the Target last built from status (changeLocked), until
	// status changes: once committed, adopt makes its status en's.
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

// edit returns en's status for writing, copying it first when it is the
// status of a committed or loaded Target (immutable: it may be published);
// en.mu held.
func (en *entry) edit() *Status {
	en.built = nil
	if en.shared {
		c := *en.status
		en.status, en.shared = &c, false
	}
	return en.status
}

// share makes t's status en's (t is published or loaded: en copies it
// before its next write); en.mu held or en not yet visible.
func (en *entry) share(t *Target) {
	en.spec, en.status, en.shared, en.built = t.Spec, &t.Status, true, nil
}

// adopt shares t's status, t being just committed, if en's status has not
// changed since t was built from it. Not before the commit: the store
// sets the revision in t's status then.
func (en *entry) adopt(t *Target) {
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.built == t {
		en.status, en.shared, en.built = &t.Status, true, nil
	}
}
