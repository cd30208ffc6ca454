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

	mu      sync.Mutex // guards everything below
	spec    *target.Spec
	status  Status // decided durable status; ahead of the published one until committed
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
