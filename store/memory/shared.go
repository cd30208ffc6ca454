package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/codec"
)

// Shared is an engine.SharedStore in memory, for tests of cluster mode
// without etcd: several engines (the replicas of a test) share one, each
// through its own Replica handle, which fences its writes with the
// replica's ownership. Like etcd, it decides whether a created target
// exists, refuses the writes of targets a replica does not own, and
// delivers every committed batch — decoded afresh, as a replica would read
// it from the store — to every follower, in commit order.
type Shared struct {
	data *Store

	mu      sync.Mutex
	log     []sharedBatch // committed batches, oldest first; guarded by mu
	trimmed uint64        // position of the newest batch dropped from log; guarded by mu
	changed chan struct{} // closed and replaced at each commit; guarded by mu
}

type sharedBatch struct {
	pos     uint64
	changes []encodedChange
}

type encodedChange struct {
	name                      string
	target, event             []byte
	delete, specChanged, crea bool
}

// NewShared returns an empty shared store whose revisions step by step.
func NewShared(step uint64) *Shared {
	return &Shared{data: New(step), changed: make(chan struct{})}
}

// Replica returns the store as one replica sees it: owns says whether the
// replica may write a target (nil: every target).
func (s *Shared) Replica(owns func(name string) bool) *Replica {
	return &Replica{s: s, owns: owns}
}

// Replica is one replica's handle on a Shared store.
type Replica struct {
	s    *Shared
	owns func(name string) bool
}

var _ engine.SharedStore = (*Replica)(nil)

// Load returns everything stored.
func (r *Replica) Load(ctx context.Context) (*engine.Stored, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.data.mu.Lock()
	defer r.s.data.mu.Unlock()
	return r.s.data.load(ctx)
}

// Commit writes the changes atomically, unless some conflict (a create of
// a target that exists, a write of a target this replica does not own):
// then nothing is written and the error is an *engine.ConflictError.
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
		case r.owns != nil && !r.owns(c.Name):
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
	err := s.data.commit(ctx, changes)
	s.data.mu.Unlock()
	if err != nil {
		return err
	}
	b := sharedBatch{pos: changes[len(changes)-1].Event.Revision}
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

// Compact deletes events below before, and the batches Follow would
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
// afresh, until ctx is done.
func (r *Replica) Follow(ctx context.Context, after uint64, deliver func(pos uint64, changes []*engine.Change)) error {
	s := r.s
	for {
		s.mu.Lock()
		if after < s.trimmed {
			s.mu.Unlock()
			return fmt.Errorf("memory store: follow from %d: %w", after, engine.ErrCompacted)
		}
		var todo []sharedBatch
		for _, b := range s.log {
			if b.pos > after {
				todo = append(todo, b)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		for _, b := range todo {
			changes, err := decodeBatch(b)
			if err != nil {
				return err
			}
			deliver(b.pos, changes)
			after = b.pos
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func decodeBatch(b sharedBatch) ([]*engine.Change, error) {
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
