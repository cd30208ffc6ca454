package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/codec"
)

// Shared is an engine.SharedStore in memory, for tests of cluster mode
// without etcd: several engines (the replicas of a test) share one, each
// through its own Replica handle. As over etcd, targets are split into
// shards, and a shard's owner is in the log: Assign gives shards to a
// replica at a position of its own, each replica's Follow delivers its
// ownership there (engine.Delivery.Owned), and a replica's Commit refuses
// the changes of targets whose shard it does not hold now (fencing, as
// etcd compares the shard key's lease). Like etcd, it decides whether a
// created target exists, vouches for a target's presence (Present), and
// delivers every committed batch — decoded afresh, as a replica would
// read it from the store — to every follower, in commit order.
type Shared struct {
	data    *Store
	shardOf func(name string) int

	mu     sync.Mutex
	log    []sharedEntry // committed batches and assignments, oldest first; guarded by mu
	owners []string      // each shard's owner now ("": none); guarded by mu
	// specs is the position of the batch that last wrote each target's
	// spec (Present); guarded by mu.
	specs   map[string]uint64
	trimmed uint64        // position of the newest entry dropped from log; guarded by mu
	changed chan struct{} // closed and replaced at each entry; guarded by mu
}

// sharedEntry is a committed batch, or (owners set) an assignment: the
// owner of each shard from pos on.
type sharedEntry struct {
	pos     uint64
	changes []encodedChange
	owners  []string
}

type encodedChange struct {
	name                      string
	target, event             []byte
	delete, specChanged, crea bool
}

// NewShared returns an empty shared store whose revisions step by step,
// with targets split into shards by shardOf (each below shards; nil: one
// shard), which no replica owns until Assign.
func NewShared(step uint64, shards int, shardOf func(name string) int) *Shared {
	if shardOf == nil {
		shards, shardOf = 1, func(string) int { return 0 }
	}
	return &Shared{data: New(step), shardOf: shardOf, owners: make([]string, max(shards, 1)),
		specs: make(map[string]uint64), changed: make(chan struct{})}
}

// Assign makes replica id the owner of shards ("": of none), from a new
// position of the log on: every replica's Follow delivers its ownership
// there. It returns that position. With no shards it changes nothing: a
// marker, whose position a replica has reached once it applied
// everything before it.
func (s *Shared) Assign(id string, shards ...int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sh := range shards {
		s.owners[sh] = id
	}
	s.data.mu.Lock()
	s.data.rev += s.data.step
	pos := s.data.rev
	s.data.mu.Unlock()
	s.log = append(s.log, sharedEntry{pos: pos, owners: slices.Clone(s.owners)})
	close(s.changed)
	s.changed = make(chan struct{})
	return pos
}

// Replica returns the store as replica id sees it.
func (s *Shared) Replica(id string) *Replica {
	return &Replica{s: s, id: id}
}

// Replica is one replica's handle on a Shared store.
type Replica struct {
	s  *Shared
	id string
}

var (
	_ engine.SharedStore    = (*Replica)(nil)
	_ engine.PresenceReader = (*Replica)(nil)
)

// ownership is replica id's ownership under owners.
func (s *Shared) ownership(id string, owners []string) *engine.Ownership {
	o := &engine.Ownership{ShardOf: s.shardOf, Owned: make([]bool, len(owners))}
	for sh, owner := range owners {
		o.Owned[sh] = owner == id
	}
	return o
}

// Present reports whether the named target is stored now and, if it is,
// the position of the batch that last wrote its spec
// (engine.PresenceReader), as etcd's quorum read of its spec key does: a
// replica whose view lags vouches for a NotFound by it.
func (r *Replica) Present(_ context.Context, name string) (uint64, bool, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	pos, ok := r.s.specs[name]
	return pos, ok, nil
}

// Load returns everything stored.
func (r *Replica) Load(ctx context.Context) (*engine.Stored, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.data.mu.Lock()
	defer r.s.data.mu.Unlock()
	st, err := r.s.data.loadLocked(ctx)
	if err == nil {
		st.Ownership = r.s.ownership(r.id, r.s.owners)
	}
	return st, err
}

// Commit writes the changes atomically, unless some conflict (a create of
// a target that exists, a write of a target whose shard this replica does
// not own now): then nothing is written and the error is an
// *engine.ConflictError.
func (r *Replica) Commit(ctx context.Context, changes []*engine.Change) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// As etcd's transaction (store/etcd plan): a name is created once per
	// transaction; a create after a delete of the name in the same
	// transaction finds it gone.
	refused := make(map[string]error)
	created := make(map[string]bool)
	deleted := make(map[string]bool)
	for _, c := range changes {
		switch {
		case c.Create && created[c.Name]:
			refused[c.Name] = fmt.Errorf("target %q: created twice in one transaction: %w", c.Name, engine.ErrAlreadyExists)
		case c.Create && !deleted[c.Name] && s.data.has(c.Name):
			refused[c.Name] = fmt.Errorf("target %q: %w", c.Name, engine.ErrAlreadyExists)
		case c.Create:
		case s.owners[s.shardOf(c.Name)] != r.id:
			refused[c.Name] = fmt.Errorf("target %q: %w", c.Name, engine.ErrOwnershipLost)
		}
		if c.Create {
			created[c.Name] = true
		}
		if c.Delete {
			deleted[c.Name] = true
		}
	}
	if len(refused) > 0 {
		return &engine.ConflictError{Refused: refused}
	}
	s.data.mu.Lock()
	err := s.data.commitLocked(ctx, changes)
	s.data.mu.Unlock()
	if err != nil {
		return err
	}
	b := sharedEntry{pos: changes[len(changes)-1].Event.Revision}
	for _, c := range changes {
		switch {
		case c.Delete:
			delete(s.specs, c.Name)
		case c.SpecChanged:
			s.specs[c.Name] = b.pos
		}
	}
	for _, c := range changes {
		e := encodedChange{name: c.Name, delete: c.Delete, specChanged: c.SpecChanged, crea: c.Create}
		var err error
		if c.Target != nil {
			if e.target, err = codec.MarshalTarget(c.Target); err != nil {
				return err
			}
		}
		if e.event, err = codec.MarshalEvent(&c.Event); err != nil {
			return err
		}
		b.changes = append(b.changes, e)
	}
	s.log = append(s.log, b)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Compact deletes events below before, and the entries Follow would
// deliver from before them.
func (r *Replica) Compact(ctx context.Context, before uint64) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.data.Compact(ctx, before); err != nil {
		return err
	}
	n := 0
	for n < len(s.log) && s.log[n].pos < before {
		s.trimmed = s.log[n].pos
		n++
	}
	s.log = s.log[n:]
	return nil
}

// Shared marks the store as written by several replicas
// (engine.SharedStore).
func (*Replica) Shared() {}

// Close does nothing: the data stays for the other replicas.
func (r *Replica) Close() error { return nil }

// Follow delivers every batch committed after revision after, decoded
// afresh, and this replica's ownership at each assignment, until ctx is
// done.
func (r *Replica) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	s := r.s
	for {
		s.mu.Lock()
		if after < s.trimmed {
			s.mu.Unlock()
			return fmt.Errorf("memory store: follow from %d: %w", after, engine.ErrCompacted)
		}
		var todo []sharedEntry
		for _, b := range s.log {
			if b.pos > after {
				todo = append(todo, b)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		for _, b := range todo {
			d := engine.Delivery{Pos: b.pos}
			if b.owners != nil {
				d.Owned = s.ownership(r.id, b.owners)
			} else {
				var err error
				if d.Changes, err = decodeBatch(b); err != nil {
					return err
				}
			}
			deliver(d)
			after = b.pos
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func decodeBatch(b sharedEntry) ([]*engine.Change, error) {
	out := make([]*engine.Change, len(b.changes))
	for i, e := range b.changes {
		c := &engine.Change{Name: e.name, Delete: e.delete, SpecChanged: e.specChanged, Create: e.crea}
		if e.target != nil {
			c.Target = &engine.Target{}
			if err := codec.UnmarshalTarget(e.target, c.Target); err != nil {
				return nil, fmt.Errorf("memory store: change of %q: %w", e.name, err)
			}
		}
		if err := codec.UnmarshalEvent(e.event, &c.Event); err != nil {
			return nil, fmt.Errorf("memory store: event of %q: %w", e.name, err)
		}
		if c.Event.Target != nil {
			// Events carry the target after them; share the decoded one.
			c.Event.Target = c.Target
		}
		out[i] = c
	}
	return out, nil
}

// has reports whether a target is stored.
func (s *Store) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.specs[name]
	return ok
}
