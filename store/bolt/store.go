// Package bolt is the embedded, durable engine.Store: one bbolt file,
// <data dir>/probed.db, locked by the one process that serves it.
//
// A Commit is one bbolt read-write transaction and one fsync, however many
// changes it carries: the engine batches concurrent changes into one
// Commit (group commit), so a burst of N transitions costs one fsync, not
// N. Values are encoded with store/codec (compact, versioned protobuf
// messages private to the stores); SchemaVersion describes the layout, and
// Open upgrades a file written by an older probed in place.
package bolt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
)

// Store is the bbolt engine.Store. Its methods are safe for concurrent
// use; bbolt runs one writer (Commit, Compact) at a time and lets Load run
// beside it. After Close every method fails with ErrClosed.
type Store struct {
	db           *bbolt.DB
	path         string
	compactBatch int
	// commitMu makes Commits append to log in the order they wrote.
	commitMu sync.Mutex
	// log is what Follow delivers: the batches Commit wrote.
	log engine.CommitLog
}

var _ engine.Store = (*Store)(nil)

// Path returns the data file's path.
func (s *Store) Path() string { return s.path }

// Load returns every target (spec and durable status, by name), the
// retained events in revision order and the last revision assigned. A
// value written by a newer probed (a field this build does not know) is an
// error wrapping ErrSchemaVersion that names it. A value that does not
// decode, an event whose key is not its revision or is beyond the stored
// revision, a spec stored under another name or without a status, and a
// bbolt panic on a damaged page are errors wrapping ErrCorrupt that name
// the file. A status without a spec (left by a status-only change after a
// delete; Commit does not write those) is ignored. Follow delivers what
// is committed after it.
func (s *Store) Load(ctx context.Context) (st *engine.Stored, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Before the read: what Commit writes meanwhile is kept for Follow
	// (a follow from the revision loaded skips what the read saw).
	s.log.Start()
	err = readSafely(s.path, func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			if err := checkCurrent(tx, s.path); err != nil {
				return err
			}
			var err error
			st, err = load(tx, s.path, formats[SchemaVersion])
			dropPages(s.db, tx.Size())
			return err
		})
	})
	if err != nil {
		return nil, s.wrap("load", err)
	}
	return st, nil
}

// readSafely runs fn, which reads the file at path with bbolt, turning a
// panic into an error wrapping ErrCorrupt: bbolt panics on damaged pages,
// and a page past the end of a file shrunk since Open faults.
func readSafely(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = corrupt(path, nil, "reading the file failed: %v", r)
		}
	}()
	return fn()
}

// load reads everything in tx, whose values are in format f; path names
// the file in errors.
func load(tx *bbolt.Tx, path string, f format) (out *engine.Stored, err error) {
	rev, _ := readU64(tx.Bucket(bucketMeta).Get(keyRevision))
	st := &engine.Stored{Revision: rev}
	if b := tx.Bucket(bucketMeta).Get(keyCompacted); b != nil {
		c, ok := readU64(b)
		if !ok {
			return nil, corrupt(path, nil, "malformed compaction mark %x", b)
		}
		st.Compacted = c
	}
	// The events decode on another goroutine while the targets decode
	// here (each is about half of a restart's load); a read-only
	// transaction's buckets may be read concurrently. It is waited for
	// whatever happens here (a panic included: the transaction must
	// outlive it).
	events := make(chan error, 1)
	evBucket := tx.Bucket(bucketEvents)
	go func() {
		events <- readSafely(path, func() error { return loadEvents(evBucket, path, f, rev, st) })
	}()
	defer func() {
		if eerr := <-events; err == nil && eerr != nil {
			out, err = nil, eerr
		}
	}()
	if err := loadTargets(tx, path, f, st); err != nil {
		return nil, err
	}
	return st, nil
}

// targetChunk is how many Targets loadTargets allocates at once.
const targetChunk = 256

// loadTargets decodes every target of tx into st.Targets. The Targets
// (640 B each, nearly all of it the status) are allocated targetChunk at
// a time: a restore keeps their specs, not them, and a hundred thousand
// allocations of the start's garbage become a few hundred.
func loadTargets(tx *bbolt.Tx, path string, f format, st *engine.Stored) error {
	statuses := tx.Bucket(bucketStatuses)
	var chunk []engine.Target
	return tx.Bucket(bucketSpecs).ForEach(func(k, v []byte) error {
		if len(chunk) == 0 {
			chunk = make([]engine.Target, targetChunk)
		}
		t := &chunk[0]
		chunk = chunk[1:]
		t.Spec = &target.Spec{}
		if err := f.spec(v, t.Spec); err != nil {
			return undecodable(path, err, "spec of target %q", k)
		}
		if t.Spec.Name != string(k) {
			return corrupt(path, nil, "spec stored as %q is named %q", k, t.Spec.Name)
		}
		b := statuses.Get(k)
		if b == nil {
			return corrupt(path, nil, "target %q has a spec but no status", k)
		}
		if err := f.status(b, &t.Status); err != nil {
			return undecodable(path, err, "status of target %q", k)
		}
		st.Targets = append(st.Targets, t)
		return nil
	})
}

// maxEventsReserved bounds the events loadEvents makes room for before
// reading them.
const maxEventsReserved = 1 << 20

// loadEvents decodes every event of b, the events bucket, into st.Events;
// rev is the stored revision. Commit numbers events contiguously and
// Compact deletes the oldest, so the events are those after st.Compacted
// up to rev: st.Events is allocated once for them (up to a bound), not
// grown (~2.5 times its size in garbage at a restart).
func loadEvents(b *bbolt.Bucket, path string, f format, rev uint64, st *engine.Stored) error {
	if rev > st.Compacted {
		st.Events = make([]engine.Event, 0, min(rev-st.Compacted, maxEventsReserved))
	}
	return b.ForEach(func(k, v []byte) error {
		r, ok := readU64(k)
		if !ok {
			return corrupt(path, nil, "event key %x is not a revision", k)
		}
		if r > rev {
			return corrupt(path, nil, "event %d is beyond the stored revision %d", r, rev)
		}
		st.Events = append(st.Events, engine.Event{})
		ev := &st.Events[len(st.Events)-1]
		if err := f.event(v, ev); err != nil {
			return undecodable(path, err, "event %d", r)
		}
		if ev.Revision != r {
			return corrupt(path, nil, "event stored as revision %d has revision %d", r, ev.Revision)
		}
		return nil
	})
}

// Commit writes the changes in one transaction, fsync'd before it
// returns: all or none. Each change's event gets the next revision
// (contiguous here, though the engine only relies on strictly increasing,
// across restarts too), recorded with Change.SetRevision; then the
// target's spec is written if SpecChanged, its status unless Delete, both
// are removed if Delete, and the event is appended. A status-only change
// for a target with no stored spec (a late change after a delete) writes
// its event only. A change with no name, or without a Target (and its
// Spec) when it is not a delete, fails the whole Commit before anything is
// written. An empty batch writes nothing.
//
// When the data dir's filesystem is full (ENOSPC) or its quota used up
// (EDQUOT), nothing is written and the error wraps engine.ErrUnavailable,
// names the data dir and says "no space": the same Commit may succeed once
// space is freed.
func (s *Store) Commit(ctx context.Context, changes []*engine.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	for i, c := range changes {
		if err := c.Check(); err != nil {
			return fmt.Errorf("%s: commit: change %d: %w", s.path, i, err)
		}
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.wrap("commit", s.db.Update(func(tx *bbolt.Tx) error {
		return commit(tx, changes)
	})); err != nil {
		return err
	}
	s.log.Append(changes)
	return nil
}

// Follow delivers every batch Commit wrote after revision after (and
// after the last Load), once fsync'd, as they were given to Commit, until
// ctx is done: the engine publishes what it delivers (engine.CommitLog).
// One follower at a time.
func (s *Store) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	return s.log.Follow(ctx, after, deliver)
}

func commit(tx *bbolt.Tx, changes []*engine.Change) error {
	meta := tx.Bucket(bucketMeta)
	specs, statuses, events := tx.Bucket(bucketSpecs), tx.Bucket(bucketStatuses), tx.Bucket(bucketEvents)
	if meta == nil || specs == nil || statuses == nil || events == nil {
		return errors.New("missing bucket")
	}
	events.FillPercent = eventsFillPercent
	rev, ok := readU64(meta.Get(keyRevision))
	if !ok {
		return errors.New("malformed revision")
	}
	for _, c := range changes {
		rev++
		c.SetRevision(rev)
		key := []byte(c.Name)
		switch {
		case c.Delete:
			if err := specs.Delete(key); err != nil {
				return err
			}
			if err := statuses.Delete(key); err != nil {
				return err
			}
		case c.SpecChanged || specs.Get(key) != nil:
			if c.SpecChanged {
				if err := put(specs, key, codec.MarshalSpec, c.Target.Spec); err != nil {
					return fmt.Errorf("target %q: %w", c.Name, err)
				}
			}
			if err := put(statuses, key, codec.MarshalStatus, &c.Target.Status); err != nil {
				return fmt.Errorf("target %q: %w", c.Name, err)
			}
		}
		if err := put(events, u64(rev), codec.MarshalEvent, &c.Event); err != nil {
			return fmt.Errorf("event %d of target %q: %w", rev, c.Name, err)
		}
	}
	return meta.Put(keyRevision, u64(rev))
}

// put stores marshal(v) under key.
func put[T any](b *bbolt.Bucket, key []byte, marshal func(*T) ([]byte, error), v *T) error {
	data, err := marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// Compact deletes the events with a revision below before, at most
// WithCompactBatch of them per transaction, so that a large compaction
// (it runs in the background) never holds the writer for long; it stops
// between transactions when ctx is done. The revision counter is not
// touched. Each transaction is durable on its own: an interrupted
// compaction leaves a prefix of the events deleted, which the next one
// finishes.
func (s *Store) Compact(ctx context.Context, before uint64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := s.compactBatch1(before)
		if err != nil {
			return s.wrap("compact", err)
		}
		if n < s.compactBatch {
			return nil
		}
	}
}

// compactBatch1 deletes up to s.compactBatch events below before in one
// transaction and returns how many it deleted. It commits nothing (and so
// costs no fsync) when there is nothing to delete.
func (s *Store) compactBatch1(before uint64) (int, error) {
	tx, err := s.db.Begin(true)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	events := tx.Bucket(bucketEvents)
	if events == nil {
		return 0, errors.New("missing bucket")
	}
	var keys [][]byte
	c := events.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < s.compactBatch; k, _ = c.Next() {
		if r, ok := readU64(k); !ok || r >= before {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	if len(keys) == 0 {
		return 0, nil
	}
	// Not c.Delete in the loop: a bbolt cursor skips the key after a
	// deleted one.
	for _, k := range keys {
		if err := events.Delete(k); err != nil {
			return 0, err
		}
	}
	meta := tx.Bucket(bucketMeta)
	newest, _ := readU64(keys[len(keys)-1])
	if old, ok := readU64(meta.Get(keyCompacted)); !ok || newest > old {
		if err := meta.Put(keyCompacted, u64(newest)); err != nil {
			return 0, err
		}
	}
	return len(keys), tx.Commit()
}

// Close closes the data file and releases its lock. Every method fails
// with ErrClosed afterwards; Close again returns nil.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", s.path, err)
	}
	return nil
}

// wrap names the file and turns bbolt's "not open" into ErrClosed; errors
// that already name the file pass through.
func (s *Store) wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return fmt.Errorf("%s: %s: %w", s.path, op, ErrClosed)
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrSchemaVersion):
		return err
	case noSpace(err):
		return noSpaceError(s.path, op, err)
	default:
		return fmt.Errorf("%s: %s: %w", s.path, op, err)
	}
}
