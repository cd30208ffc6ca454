package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/codec"
)

// pageSize is the most keys one read of Load returns.
const pageSize = 2000

// loadAttempts bounds the Loads restarted because etcd compacted the
// revision they read meanwhile.
const loadAttempts = 5

// errStale: a compaction passed the revision Load was reading.
var errStale = errors.New("etcd compacted the revision being read")

// Load returns every target and the retained history, as of one etcd
// revision R: the specs and statuses read at R, and the events of
// P/events's history from etcd's compaction revision C up to R (read with
// a watch, etcd's only way to read a key's history). Revision is R<<10 |
// 1023; Compacted is C<<10 - 1 (0 if etcd never compacted). A value that
// does not decode is an error naming its key (wrapping ErrCorrupt, or
// codec.ErrNewerFormat for a value of a newer probed); a status without a
// spec is ignored. With Options.Shards, Ownership is the replica's at R
// (own.go). Transient etcd failures are retried until ctx ends. Load also
// corrects the counts of targets (P/usage/) when they differ from the
// targets it read (usage.go, repairUsage): it may write.
func (s *Store) Load(ctx context.Context) (*engine.Stored, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bind(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		var st *engine.Stored
		var specs *specsAt
		var counts *usageAt
		err := s.retrying(ctx, "load", func() (again bool, err error) {
			// One attempt reads many times: each read has its own
			// request timeout, and a transient failure restarts it.
			st, specs, counts, err = s.load(ctx)
			return err != nil && transient(ctx, err), err
		})
		switch {
		case errors.Is(err, errStale) && attempt < loadAttempts:
			s.log.Info("etcd store: compacted while loading; loading again", "err", err)
			continue
		case err != nil:
			return nil, fmt.Errorf("etcd store: load: %w", err)
		}
		s.mu.Lock()
		s.loaded = specs
		s.mu.Unlock()
		if counts != nil {
			if fix := s.usageFix(counts, st.Targets); len(fix) > 0 {
				if err := s.repairUsage(ctx, specs.rev, counts, fix); err != nil {
					// The next Load tries again; meanwhile the limits
					// count from what etcd holds.
					s.log.Warn("etcd store: the counts of targets differ from the targets stored and could not be corrected", "corrections", fix, "err", err)
				}
			}
		}
		return st, nil
	}
}

// load reads everything at the current revision, and the counts of
// targets there (nil when the store counts nothing).
func (s *Store) load(ctx context.Context) (*engine.Stored, *specsAt, *usageAt, error) {
	var head *clientv3.GetResponse
	err := s.request1(ctx, func(rctx context.Context) (err error) {
		head, err = s.cli.Get(rctx, s.keys.Events(), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	rev := head.Header.Revision
	st := &engine.Stored{Revision: keyspace.Position(rev)}
	specs, err := s.readSpecs(ctx, rev)
	if err != nil {
		return nil, nil, nil, err
	}
	if st.Targets, err = s.readTargets(ctx, rev, specs); err != nil {
		return nil, nil, nil, err
	}
	var counts *usageAt
	if !s.usage.off {
		if counts, err = s.readUsage(ctx, rev); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(head.Kvs) > 0 {
		var compacted int64
		st.Events, compacted, err = s.replay(ctx, rev, head.Kvs[0].ModRevision)
		if err != nil {
			return nil, nil, nil, err
		}
		st.Compacted = keyspace.CompactedBelow(compacted)
	}
	loaded := &specsAt{rev: rev, specs: specs}
	if s.fence != nil {
		if loaded.owners, err = s.readOwners(ctx, rev); err != nil {
			return nil, nil, nil, err
		}
		leases := loaded.owners.leases()
		st.Ownership = s.ownership(leases)
		s.fenceWith(leases)
	}
	return st, loaded, counts, nil
}

// request1 runs one request with the request timeout; an error after
// the timeout or the store's Close says so (errRequestTimeout, ErrClosed).
func (s *Store) request1(ctx context.Context, do func(rctx context.Context) error) error {
	return s.attempt(ctx, s.timeout, do)
}

// attempt runs one request that times out after d (none if d <= 0); an
// error after the timeout or the store's Close says so
// (errRequestTimeout, ErrClosed).
func (s *Store) attempt(ctx context.Context, d time.Duration, do func(rctx context.Context) error) error {
	rctx, cancel := s.request(ctx, d)
	defer cancel()
	err := do(rctx)
	if err != nil && ctx.Err() == nil {
		switch cause := context.Cause(rctx); {
		case errors.Is(cause, errRequestTimeout):
			err = fmt.Errorf("%w after %v: %w", errRequestTimeout, d, err)
		case errors.Is(cause, ErrClosed):
			err = fmt.Errorf("%w: %w", ErrClosed, err)
		}
	}
	return err
}

// readRange calls fn with every key of [start, end) at revision rev, in
// key order, a page at a time. A compacted rev is errStale.
func (s *Store) readRange(ctx context.Context, start, end string, rev int64, fn func(kv *mvccpb.KeyValue) error) error {
	key := start
	for {
		var resp *clientv3.GetResponse
		err := s.request1(ctx, func(rctx context.Context) (err error) {
			resp, err = s.cli.Get(rctx, key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(pageSize))
			return err
		})
		if errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("%w: reading %s at revision %d: %w", errStale, start, rev, err)
		}
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// readSpecs returns every target's spec at revision rev, by name.
func (s *Store) readSpecs(ctx context.Context, rev int64) (map[string]*target.Spec, error) {
	specs := make(map[string]*target.Spec)
	err := s.readRange(ctx, s.keys.Specs(), clientv3.GetPrefixRangeEnd(s.keys.Specs()), rev, func(kv *mvccpb.KeyValue) error {
		name := strings.TrimPrefix(string(kv.Key), s.keys.Specs())
		spec := &target.Spec{}
		if err := codec.UnmarshalSpec(kv.Value, spec); err != nil {
			return undecodable(string(kv.Key), err)
		}
		if spec.Name != name {
			return corrupt(string(kv.Key), "the spec is named %q", spec.Name)
		}
		specs[name] = spec
		return nil
	})
	return specs, err
}

// readTargets returns the targets of specs with their statuses at rev, in
// name order. A status without a spec (a target deleted, or not yet
// created, at rev) is skipped.
func (s *Store) readTargets(ctx context.Context, rev int64, specs map[string]*target.Spec) ([]*engine.Target, error) {
	targets := make([]*engine.Target, 0, len(specs))
	err := s.readRange(ctx, s.keys.Statuses(), clientv3.GetPrefixRangeEnd(s.keys.Statuses()), rev, func(kv *mvccpb.KeyValue) error {
		name := strings.TrimPrefix(string(kv.Key), s.keys.Statuses())
		spec := specs[name]
		if spec == nil {
			return nil
		}
		t := &engine.Target{Spec: spec}
		if err := codec.UnmarshalStatus(kv.Value, &t.Status); err != nil {
			return undecodable(string(kv.Key), err)
		}
		if t.Status.Revision >= MaxBatch {
			return corrupt(string(kv.Key), "index %d in its transaction, beyond %d", t.Status.Revision, MaxBatch-1)
		}
		t.Status.Revision = keyspace.Revision(kv.ModRevision, int(t.Status.Revision))
		targets = append(targets, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(targets) != len(specs) {
		found := make(map[string]bool, len(targets))
		for _, t := range targets {
			found[t.Spec.Name] = true
		}
		for name := range specs {
			if !found[name] {
				return nil, corrupt(s.keys.Spec(name), "a spec without a status (%s)", s.keys.Status(name))
			}
		}
	}
	return targets, nil
}

// undecodable is the error of a value at key that does not decode.
func undecodable(key string, err error) error {
	if errors.Is(err, codec.ErrNewerFormat) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, key, err)
}

// replay returns the events of P/events's history from etcd's compaction
// revision up to last (its mod revision at rev), and that compaction
// revision (0: never compacted).
func (s *Store) replay(ctx context.Context, rev, last int64) ([]engine.Event, int64, error) {
	var events []engine.Event
	from, compacted := int64(1), int64(0)
	for {
		done, err := s.replayFrom(ctx, from, last, func(r int64, value []byte) error {
			changes, err := s.decodeBatch(r, value)
			for _, c := range changes {
				events = append(events, c.Event)
			}
			return err
		})
		var ce *compactedError
		switch {
		case errors.As(err, &ce) && ce.rev > rev:
			return nil, 0, fmt.Errorf("%w: history compacted up to %d, beyond %d", errStale, ce.rev, rev)
		case errors.As(err, &ce) && ce.rev > last:
			return nil, ce.rev, nil // every event up to rev is compacted
		case errors.As(err, &ce):
			from, compacted, events = ce.rev, ce.rev, nil
			continue
		case err != nil:
			return nil, 0, err
		case done:
			return events, compacted, nil
		}
	}
}

// compactedError: a watch started below etcd's compaction revision rev.
type compactedError struct{ rev int64 }

func (e *compactedError) Error() string {
	return fmt.Sprintf("etcd compacted its history up to revision %d", e.rev)
}

// replayFrom watches P/events from revision from, calling fn with each
// value put until the one at revision last (done). A watch that cannot
// start there is a *compactedError.
func (s *Store) replayFrom(ctx context.Context, from, last int64, fn func(rev int64, value []byte) error) (done bool, err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.cli.Watch(wctx, s.keys.Events(), clientv3.WithRev(from)) {
		if resp.CompactRevision != 0 {
			return false, &compactedError{rev: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return false, err
		}
		for _, ev := range resp.Events {
			if ev.Type != clientv3.EventTypePut || ev.Kv.ModRevision > last {
				return false, corrupt(s.keys.Events(), "%s at revision %d, beyond its revision %d", ev.Type, ev.Kv.ModRevision, last)
			}
			if err := fn(ev.Kv.ModRevision, ev.Kv.Value); err != nil {
				return false, err
			}
			if ev.Kv.ModRevision == last {
				return true, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%w: %s", errWatchEnded, s.keys.Events())
}

// decodeBatch decodes the value of P/events put at etcd revision rev, with
// each change's revision set.
func (s *Store) decodeBatch(rev int64, value []byte) ([]*engine.Change, error) {
	changes, err := codec.UnmarshalBatch(value)
	if err != nil {
		return nil, undecodable(fmt.Sprintf("%s@%d", s.keys.Events(), rev), err)
	}
	if len(changes) > MaxBatch {
		return nil, corrupt(fmt.Sprintf("%s@%d", s.keys.Events(), rev), "%d changes, more than %d", len(changes), MaxBatch)
	}
	for i, c := range changes {
		c.SetRevision(keyspace.Revision(rev, i))
	}
	return changes, nil
}
