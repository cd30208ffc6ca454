package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Store keeps what must survive a restart: every target's spec and durable
// status, the event history and the revision counter. It speaks in
// targets, statuses and events, not in buckets or keys, so an
// implementation over bbolt (the embedded default), memory (tests) or etcd
// (several replicas) slots in without touching the engine.
//
// The engine calls Load once, then Commit from one goroutine at a time (a
// PipelinedStore: from up to CommitsInFlight at once), Compact from one
// goroutine at a time, and Follow from another. It publishes only what Follow delivers:
// a store's ordered log is the one path by which changes become visible.
type Store interface {
	// Load returns everything stored. An unreadable or corrupt store is an
	// error naming the file and the problem; it never reads as empty.
	Load(ctx context.Context) (*Stored, error)
	// Commit makes a batch of changes durable atomically (all or none) and
	// returns only once they are (fsync'd). It assigns each change's event
	// a revision strictly greater than every revision before it — strictly
	// increasing, not necessarily contiguous — and records it with
	// Change.SetRevision. It may fail with an error wrapping
	// ErrOwnershipLost (use *OwnershipLostError to name the targets) when
	// another replica owns some of the targets; nothing is written then.
	Commit(ctx context.Context, changes []*Change) error
	// Compact deletes the events with a revision below before and
	// remembers the newest one it deleted (Stored.Compacted).
	Compact(ctx context.Context, before uint64) error
	// Close releases the store; it is not usable afterwards.
	Close() error
	// Follow calls deliver, from one goroutine and in revision order,
	// with every batch of changes committed after revision after — this
	// engine's own, and over a SharedStore every replica's — each only
	// once it is durable, and with the position reached — Delivery.Pos:
	// everything up to it has been delivered — also when the store moved
	// on without a change; and, wherever the engine's ownership changes
	// (which targets it probes: see Ownership), with the new ownership at
	// that position. It returns when ctx is done (nil), or with an error
	// when it cannot go on: one wrapping ErrCompacted when after is older
	// than the store's history (the engine then Loads again and follows
	// on from there: reload.go). A store with one writer and no log of its
	// own delivers its Commits' batches as they were given (CommitLog).
	//
	// Each delivered change is whole, as the engine makes its own: its
	// revision set (SetRevision), Target with its Spec also when only the
	// status changed (the engine's view takes both from it), a Target
	// naming the target (Target.Spec.Name) also for a Delete, and
	// Event.Target the same pointer as Target for lifecycle events.
	Follow(ctx context.Context, after uint64, deliver func(Delivery)) error
}

// Delivery is what a store's Follow delivers at one position of its log.
type Delivery struct {
	// Pos is the position reached: everything up to it is delivered.
	Pos uint64
	// Changes are the changes committed at Pos, in order (none when the
	// store moved on without one).
	Changes []*Change
	// Owned, when not nil, is the engine's ownership from Pos on, after
	// Changes: it changed at Pos. The store does not modify it afterwards.
	Owned *Ownership
}

// Ownership says which targets an engine probes — owns —: those of the
// shards it holds. A store says it in its log: Load gives it as of the
// store's revision (Stored.Ownership), Follow again wherever it changes
// (Delivery.Owned). A store with one writer owns every target (nil); over
// etcd a replica owns the shards whose owner keys its lease holds, as of
// the revision of their claim. Every replica of a store uses the same
// ShardOf and number of shards.
type Ownership struct {
	// ShardOf is the shard of a named target, below len(Owned); nil: 0.
	ShardOf func(name string) int
	// Owned[s] says whether the engine owns the targets of shard s.
	Owned []bool
}

// everything is the ownership of a store with one writer: one shard,
// owned.
var everything = &Ownership{Owned: []bool{true}}

// shard is the shard of the named target.
func (o *Ownership) shard(name string) int {
	if o.ShardOf == nil {
		return 0
	}
	return o.ShardOf(name)
}

// owns reports whether shard s is owned (false beyond the shards).
func (o *Ownership) owns(s int) bool { return s >= 0 && s < len(o.Owned) && o.Owned[s] }

// A SharedStore is a Store that several engines — replicas — write (cluster
// mode over etcd). Each engine publishes what Follow delivers, every
// replica's commits in the store's order, so every replica's view and event
// history are the same. Revisions are the store's: increasing, not
// contiguous, the same on every replica. Its Follow says which targets
// each replica owns (Delivery.Owned).
//
// Commit has two more duties: a change with Create set is refused (nothing
// written) when its target exists — over a store with one writer the
// engine, which alone creates, knows that —, and the store refuses the
// changes of targets this replica does not own as of its log (fencing);
// both are reported as a *ConflictError naming the refused targets. The
// engine's registry follows the store's log over every store.
type SharedStore interface {
	Store
	// Shared marks the store as written by several replicas, with the
	// duties above.
	Shared()
}

// A PipelinedStore is a Store whose Commit may be called again before an
// earlier call returned: up to CommitsInFlight calls at once (etcd, where
// a Commit is a network round trip and a raft round). The engine never has
// two changes of one target in flight at once, nor splits a unit across
// Commits; the store applies each Commit atomically, in an order of its
// own, and its revisions and Follow's order are that order. Over any other
// Store the engine writes one batch at a time.
type PipelinedStore interface {
	Store
	// CommitsInFlight is the most Commit calls the store takes at once.
	CommitsInFlight() int
}

// Stored is what Load returns.
type Stored struct {
	Targets []*Target
	// Events are the retained history, in revision order.
	Events []Event
	// Revision is the last revision assigned (at least that of every
	// event, also of compacted ones); the next is greater.
	Revision uint64
	// Compacted is the revision of the newest event Compact deleted (0 if
	// none): a watch from a revision at or below it is ErrCompacted.
	Compacted uint64
	// Ownership is the engine's as of Revision (nil: every target, a
	// store with one writer).
	Ownership *Ownership
}

// Change is one durable change: a target's new state and the event that
// tells of it.
type Change struct {
	Name string
	// Target is the target after the change; nil when Delete.
	Target *Target
	// SpecChanged: Target.Spec is new (create, update) and must be written;
	// otherwise only the status changed.
	SpecChanged bool
	// Delete removes the target; its events stay until compacted.
	Delete bool
	// Create: the change registers a new target. A SharedStore refuses it
	// when the target exists (see SharedStore).
	Create bool
	// Apply, on a create of a journaled Apply (ApplyJournal), is the
	// apply's hold of its set's lock: the store refuses the change
	// (a reason wrapping ErrAborted) once the hold is lost.
	Apply *ApplyTicket
	// Event is appended to the history.
	Event Event

	// becameReady: the change makes the target ready for the first time
	// since its creation or reset, readyAfter after its start; reported to
	// Observer.Ready once the change is durable.
	becameReady bool
	readyAfter  time.Duration
	// written, when set (onWritten), is called once the change is written
	// or will never be (refused, failed, the engine stopped); see
	// markWritten.
	written atomic.Pointer[func()]
	// entry is the entry the change was built from (changeLocked), which
	// adopts Target's status once committed (nil for a create: the follow
	// loop registers the target when the store delivers it).
	entry *entry
	// rec is Target's record, made once committed (see record).
	rec atomic.Pointer[record]
}

// record returns the compact form of c.Target (nil without one), made at
// the first call: call it once the change is committed (its revision
// set). The committer (adopting it) and the follow loop (publishing it)
// may ask at once, when the store delivers the very changes it was given:
// both get the same record.
func (c *Change) record() *record {
	if c.Target == nil {
		return nil
	}
	if r := c.rec.Load(); r != nil {
		return r
	}
	if r := newRecord(c.Target); c.rec.CompareAndSwap(nil, r) {
		return r
	}
	return c.rec.Load()
}

// onWritten sets the hook markWritten calls: once the change is durable
// (its Commit returned, or the store's log delivered it: whichever comes
// first) or will never be.
func (c *Change) onWritten(f func()) { c.written.Store(&f) }

// markWritten calls the written hook, at most once in all.
func (c *Change) markWritten() {
	if f := c.written.Swap(nil); f != nil {
		(*f)()
	}
}

// Check reports what makes c a change no Store can write (nil: none): no
// name; no Target, or a Target without its Spec, when it is not a delete;
// a new spec (SpecChanged) that names another target; a create without
// its spec. A Store's Commit checks every change before it writes any.
func (c *Change) Check() error {
	switch {
	case c.Name == "":
		return errors.New("no target name")
	case c.Delete:
		return nil
	case c.Target == nil:
		return fmt.Errorf("target %q: no Target and not a delete", c.Name)
	case c.Target.Spec == nil:
		return fmt.Errorf("target %q: no Spec", c.Name)
	case c.SpecChanged && c.Target.Spec.Name != c.Name:
		return fmt.Errorf("target %q: spec is named %q", c.Name, c.Target.Spec.Name)
	case c.Create && !c.SpecChanged:
		return fmt.Errorf("target %q: a create without its spec (SpecChanged)", c.Name)
	}
	return nil
}

// SetRevision records the revision Commit assigned to the change: on the
// event and on the target's status (which the event's Target shares).
func (c *Change) SetRevision(rev uint64) {
	c.Event.Revision = rev
	if c.Target != nil {
		c.Target.Status.Revision = rev
	}
}
