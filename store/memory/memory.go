// Package memory is an engine.Store that keeps everything in memory, for
// tests. It encodes what it stores with store/codec, exactly as the
// durable stores do, so a test that restarts an engine over the same
// memory store sees what a restart over bbolt would: only the durable
// fields come back.
package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
)

// Store is an in-memory engine.Store. The zero value is not usable; call New.
type Store struct {
	mu        sync.Mutex
	specs     map[string][]byte
	statuses  map[string][]byte
	events    [][]byte
	revs      []uint64 // revision of each element of events
	rev       uint64
	compacted uint64 // newest deleted event
	closed    bool
	// Step is added to the revision for each change (default 1); a step
	// above 1 exercises "strictly increasing, not contiguous".
	step uint64
	// log is what Follow delivers: the batches Commit wrote.
	log engine.CommitLog
}

// New returns an empty store whose revisions increase by step (at least 1).
func New(step uint64) *Store {
	return &Store{specs: make(map[string][]byte), statuses: make(map[string][]byte), step: max(step, 1)}
}

var errClosed = errors.New("memory store: closed")

// Load returns everything stored; Follow delivers what is committed
// after it.
func (s *Store) Load(ctx context.Context) (*engine.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.loadLocked(ctx)
	if err == nil {
		s.log.Start()
	}
	return st, err
}

// loadLocked is Load; s.mu held.
func (s *Store) loadLocked(context.Context) (*engine.Stored, error) {
	if s.closed {
		return nil, errClosed
	}
	st := &engine.Stored{Revision: s.rev, Compacted: s.compacted}
	for _, name := range slices.Sorted(maps.Keys(s.specs)) {
		t := &engine.Target{Spec: &target.Spec{}}
		if err := codec.UnmarshalSpec(s.specs[name], t.Spec); err != nil {
			return nil, fmt.Errorf("memory store: target %q spec: %w", name, err)
		}
		if err := codec.UnmarshalStatus(s.statuses[name], &t.Status); err != nil {
			return nil, fmt.Errorf("memory store: target %q status: %w", name, err)
		}
		st.Targets = append(st.Targets, t)
	}
	for _, b := range s.events {
		var ev engine.Event
		if err := codec.UnmarshalEvent(b, &ev); err != nil {
			return nil, fmt.Errorf("memory store: event: %w", err)
		}
		st.Events = append(st.Events, ev)
	}
	return st, nil
}

// Commit applies the changes atomically; Follow delivers them.
func (s *Store) Commit(ctx context.Context, changes []*engine.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.commitLocked(ctx, changes); err != nil {
		return err
	}
	s.log.Append(changes)
	return nil
}

// Follow delivers every batch Commit wrote after revision after (and
// after the last Load), as they were given to Commit, until ctx is done:
// the engine publishes what it delivers (engine.CommitLog).
func (s *Store) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	return s.log.Follow(ctx, after, deliver)
}

// commitLocked is Commit without the log; s.mu held.
func (s *Store) commitLocked(_ context.Context, changes []*engine.Change) error {
	if s.closed {
		return errClosed
	}
	type encoded struct{ spec, status, event []byte }
	out := make([]encoded, len(changes))
	rev := s.rev
	for _, c := range changes {
		if !c.Delete && (c.Target == nil || c.Target.Spec == nil) {
			return fmt.Errorf("memory store: change of %q: no Target (or Spec) and not a delete", c.Name)
		}
	}
	for i, c := range changes {
		rev += s.step
		c.SetRevision(rev)
		var err error
		if c.SpecChanged && !c.Delete {
			if out[i].spec, err = codec.MarshalSpec(c.Target.Spec); err != nil {
				return err
			}
		}
		if !c.Delete {
			if out[i].status, err = codec.MarshalStatus(&c.Target.Status); err != nil {
				return err
			}
		}
		if out[i].event, err = codec.MarshalEvent(&c.Event); err != nil {
			return err
		}
	}
	for i, c := range changes {
		switch {
		case c.Delete:
			delete(s.specs, c.Name)
			delete(s.statuses, c.Name)
		default:
			if out[i].spec != nil {
				s.specs[c.Name] = out[i].spec
			}
			s.statuses[c.Name] = out[i].status
		}
		s.events = append(s.events, out[i].event)
		s.revs = append(s.revs, c.Event.Revision)
	}
	s.rev = rev
	return nil
}

// Compact deletes events with a revision below before.
func (s *Store) Compact(_ context.Context, before uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	i, _ := slices.BinarySearch(s.revs, before)
	if i > 0 {
		s.compacted = max(s.compacted, s.revs[i-1])
	}
	s.events = slices.Delete(s.events, 0, i)
	s.revs = slices.Delete(s.revs, 0, i)
	return nil
}

// Close marks the store closed; a closed memory store keeps its data, so a
// test can Reopen it as a restarted process would reopen its file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Reopen makes a closed store usable again with the same data.
func (s *Store) Reopen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = false
}
