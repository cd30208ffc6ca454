package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/keyspace"
)

// Shared marks the store as written by several replicas
// (engine.SharedStore).
func (*Store) Shared() {}

// Follow delivers, in order, every transaction committed after revision
// after, by any replica, through one etcd watch with progress
// notifications of the prefix's keys up to P/specs/ (P/events, the
// cluster's members and shards, P/meta: every transaction of the store
// puts P/events, so leaving out the specs and statuses, which P/events
// repeats, loses no revision and halves what the watch carries): for each etcd revision, deliver(R<<10|1023,
// changes) with the changes of the transaction at R (revisions set, and
// Target and Event.Target as the engine makes them: a status-only
// change's Target has the target's spec), or deliver(R<<10|1023, nil) for
// revisions without events under the prefix (shard claims, members) and
// for etcd's progress notifications. Revisions without events may be
// folded into the next delivery.
//
// A transient failure (etcd without a leader, a member gone) resumes the
// watch after the last revision delivered, on a backoff. It returns nil
// when ctx ends, ErrClosed when the store closes, an error wrapping
// engine.ErrCompacted (a *engine.CompactedError) when etcd compacted the
// history after after, and an error when a value does not decode.
//
// Delivering status-only changes whole takes every target's spec: Follow
// keeps them (shared with what it delivers), from the Load of the same
// revision or else read from etcd at after.
func (s *Store) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	if err := s.usable(); err != nil {
		return err
	}
	outer := ctx
	ctx, cancel := s.bind(ctx)
	defer cancel()
	f := &follower{s: s, after: after, deliver: deliver}
	// The first etcd revision with events after after: after's own
	// revision when it is inside it (some events of it may be later).
	start := max(keyspace.EtcdRevision(after+1), 1)
	f.last = start - 1
	f.observed = f.last
	// Where this Follow starts, for Membership: a view below it missed
	// revisions, whether or not another comes soon.
	f.observe(f.last, nil)
	var err error
	if f.specs, f.owners, err = s.specsAt(ctx, f.last); err != nil {
		return f.end(outer, err)
	}
	if f.owners != nil {
		f.leases = f.owners.leases()
		s.fenceWith(f.leases)
	}
	var b backoff
	for attempt := 1; ; attempt++ {
		progressed, err := f.watch(ctx)
		if progressed {
			b, attempt = backoff{}, 1
		}
		if ctx.Err() != nil || !transient(ctx, err) {
			return f.end(outer, err)
		}
		s.logRetry("follow", attempt, err)
		if !s.wait(ctx, &b) {
			return f.end(outer, ctx.Err())
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	s       *Store
	after   uint64
	deliver func(engine.Delivery)
	// last is the etcd revision delivered last.
	last int64
	// owners is the ownership as of last (Options.Shards; nil without),
	// and leases what it owns, as last delivered.
	owners *owners
	leases []clientv3.LeaseID
	// observed is the etcd revision last handed to Membership (or the
	// one Follow started after).
	observed int64
	// specs is every target's spec as of last.
	specs map[string]*target.Spec
}

// end is Follow's result for err: nil when its caller's ctx ended,
// ErrClosed when the store closed.
func (f *follower) end(ctx context.Context, err error) error {
	if f.s.ctx.Err() != nil {
		return ErrClosed
	}
	if ctx.Err() == nil {
		return fmt.Errorf("etcd store: follow: %w", err)
	}
	return nil // the caller ended it
}

// watch follows from f.last+1 until the watch ends; progressed: it
// delivered something.
func (f *follower) watch(ctx context.Context) (progressed bool, err error) {
	s := f.s
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	start, end := s.keys.Followed()
	wch := s.cli.Watch(wctx, start, clientv3.WithRange(end), clientv3.WithRev(f.last+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return progressed, &engine.CompactedError{Requested: f.after + 1, Oldest: keyspace.Revision(resp.CompactRevision, 0)}
		}
		if err := resp.Err(); err != nil {
			return progressed, err
		}
		if resp.IsProgressNotify() {
			if rev := resp.Header.Revision; rev > f.last {
				f.last = rev
				f.deliver(engine.Delivery{Pos: keyspace.Position(rev)})
				f.observe(rev, nil)
				progressed = true
			}
			continue
		}
		delivered := f.last
		for evs := resp.Events; len(evs) > 0; {
			// The events of one revision: its P/events (delivered), the
			// other keys' (the ownership's, and Membership's).
			rev := evs[0].Kv.ModRevision
			n := 1
			for n < len(evs) && evs[n].Kv.ModRevision == rev {
				n++
			}
			group := evs[:n]
			evs = evs[n:]
			if rev <= f.last {
				continue // delivered before a reconnection
			}
			d := engine.Delivery{Pos: keyspace.Position(rev)}
			var others []*clientv3.Event
			logged := false
			for _, ev := range group {
				if string(ev.Kv.Key) != s.keys.Events() {
					others = append(others, ev)
					continue
				}
				logged = true
				if ev.Type != clientv3.EventTypePut {
					return progressed, corrupt(s.keys.Events(), "deleted at revision %d", rev)
				}
				changes, err := f.batch(rev, ev.Kv.Value)
				if err != nil {
					return progressed, err
				}
				d.Changes = changes
			}
			d.Owned = f.own(others)
			f.last = rev
			// Membership sees a revision once the engine's view has
			// reached it.
			if logged || d.Owned != nil || s.membership != nil && len(others) > 0 {
				f.deliver(d)
				delivered = rev
				progressed = true
			}
			if s.membership != nil && len(others) > 0 {
				f.observe(rev, others)
			}
		}
		if f.last > delivered {
			// Revisions without events are folded into one delivery.
			f.deliver(engine.Delivery{Pos: keyspace.Position(f.last)})
			progressed = true
		}
		if f.last > f.observed {
			f.observe(f.last, nil)
		}
	}
	if err := ctx.Err(); err != nil {
		return progressed, err
	}
	return progressed, errWatchEnded
}

// own applies the events of the member and shard keys of one revision to
// the ownership (Options.Shards) and returns the engine's ownership when
// it changed (nil otherwise, and without Options.Shards), once Commit
// fences with it.
func (f *follower) own(events []*clientv3.Event) *engine.Ownership {
	if f.owners == nil || len(events) == 0 || !f.owners.apply(events) {
		return nil
	}
	leases := f.owners.leases()
	if slices.Equal(leases, f.leases) {
		return nil
	}
	f.leases = leases
	f.s.fenceWith(leases)
	return f.s.ownership(leases)
}

// observe hands the changes of the keys besides P/events at etcd
// revision rev to Options.Membership.
func (f *follower) observe(rev int64, events []*clientv3.Event) {
	if f.s.membership == nil {
		return
	}
	f.s.membership(f.observed, rev, events)
	f.observed = rev
}

// RequestProgress asks etcd for a progress notification on Follow's
// watch (every watch of the client without metadata of its own but
// WithRequireLeader's): Follow then moves to etcd's current revision
// although no key it watches changed, once etcd's watchers are synced.
// An etcd shared with other clients moves its revision by their writes,
// which Follow does not see otherwise before etcd's progress interval
// (10 minutes at its default).
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
}

// batch decodes the transaction of etcd revision rev for delivery: the
// changes after f.after, each whole (a status-only change gets its
// target's spec), and keeps f.specs current.
func (f *follower) batch(rev int64, value []byte) ([]*engine.Change, error) {
	changes, err := f.s.decodeBatch(rev, value)
	if err != nil {
		return nil, err
	}
	out := changes[:0]
	for _, c := range changes {
		spec := f.specs[c.Name]
		switch {
		case c.Delete:
			delete(f.specs, c.Name)
		case c.SpecChanged && c.Target != nil:
			f.specs[c.Name] = c.Target.Spec
		}
		switch {
		case c.Target == nil && c.Delete:
			// The engine's view forgets a deleted target by its name.
			c.Target = &engine.Target{Spec: orName(spec, c.Name)}
		case c.Target != nil && c.Target.Spec == nil:
			// A status-only change: the spec is the one stored before (a
			// bare one for a change of a target deleted earlier in its
			// transaction, which the engine never makes).
			c.Target.Spec = orName(spec, c.Name)
		}
		if c.Event.Revision > f.after {
			out = append(out, c)
		}
	}
	return out, nil
}

// orName is spec, or a spec with only the name when there is none.
func orName(spec *target.Spec, name string) *target.Spec {
	if spec == nil {
		return &target.Spec{Name: name}
	}
	return spec
}

// specsAt returns every target's spec at etcd revision rev, and with
// Options.Shards the ownership there: those the Load of rev read (handed
// over once), or read now.
func (s *Store) specsAt(ctx context.Context, rev int64) (map[string]*target.Spec, *owners, error) {
	s.mu.Lock()
	loaded := s.loaded
	s.loaded = nil // handed over, or of no use
	s.mu.Unlock()
	switch {
	case loaded != nil && loaded.rev == rev:
		return loaded.specs, loaded.owners, nil
	case rev <= 0:
		var o *owners
		if s.fence != nil {
			o = newOwners(s.keys, s.id, s.process)
		}
		return make(map[string]*target.Spec), o, nil
	}
	var specs map[string]*target.Spec
	var o *owners
	err := s.retrying(ctx, "follow", func() (bool, error) {
		var err error
		specs, err = s.readSpecs(ctx, rev)
		if err == nil && s.fence != nil {
			o, err = s.readOwners(ctx, rev)
		}
		return err != nil && transient(ctx, err), err
	})
	if errors.Is(err, errStale) {
		compacted, cerr := s.compactRevision(ctx)
		if cerr != nil {
			return nil, nil, cerr
		}
		return nil, nil, &engine.CompactedError{Requested: keyspace.Position(rev) + 1, Oldest: keyspace.Revision(compacted, 0)}
	}
	return specs, o, err
}

// compactRevision is etcd's compaction revision, known to be above 1,
// from a watch of P/events from revision 1 (its first answer).
func (s *Store) compactRevision(ctx context.Context) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	resp, ok := <-s.cli.Watch(wctx, s.keys.Events(), clientv3.WithRev(1))
	switch {
	case !ok && ctx.Err() != nil:
		return 0, ctx.Err()
	case !ok:
		return 0, errWatchEnded
	case resp.CompactRevision != 0:
		return resp.CompactRevision, nil
	}
	return 0, resp.Err() // nil: not compacted after all
}
