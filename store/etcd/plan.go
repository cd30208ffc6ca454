package etcd

import (
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/codec"
)

// etcd's defaults that bound one transaction: --max-txn-ops (operations
// in each branch, and compares) and --max-request-bytes.
const (
	etcdMaxTxnOps       = 128
	etcdMaxRequestBytes = 1536 * 1024
)

// plan is the transaction of one Commit, but for what concerns
// its writer key (its compare changes between attempts).
type plan struct {
	// checks are the compares; the other branch reads their keys, in the
	// same order.
	checks []*check
	// ops write the specs and statuses, then P/events.
	ops []clientv3.Op
	// names are the targets of the batch, each once.
	names []string
	// bytes estimates the request's size.
	bytes int
	// counts is what the batch changes in the counts of targets (nil:
	// nothing; usage.go).
	counts *counting
}

// check is one compare of a transaction and the targets whose changes it
// guards.
type check struct {
	key    string
	create bool             // CreateRevision(key) == 0 (the spec key of a created target)
	lease  clientv3.LeaseID // otherwise LeaseValue(key) == lease (a fence, or an apply's lock)
	// apply: key is the lock of an apply's set (engine.Change.Apply), and
	// a refusal wraps engine.ErrAborted.
	apply bool
	names []string
}

func (c *check) cmp() clientv3.Cmp {
	if c.create {
		return clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)
	}
	return clientv3.Compare(clientv3.LeaseValue(c.key), "=", c.lease)
}

// refusal says why the store refused a change of a target.
func (c *check) refusal(name string) error {
	if c.create {
		return fmt.Errorf("target %q: %w", name, engine.ErrAlreadyExists)
	}
	if c.apply {
		return fmt.Errorf("target %q: this replica no longer holds the apply of its set (%s is not on lease %x: another replica finishes it): %w",
			name, c.key, int64(c.lease), engine.ErrAborted)
	}
	return fmt.Errorf("target %q: %s is not held on lease %x: %w", name, c.key, int64(c.lease), engine.ErrOwnershipLost)
}

// opOverhead bounds what one operation or compare adds to a request
// besides its key and value (field tags, lengths, options).
const opOverhead = 32

// targetOps is what a transaction writes for one target: its changes in
// order, folded (etcd takes one operation per key in a transaction).
type targetOps struct {
	spec, status []byte // to put; nil: nothing (or delete)
	deleted      bool   // delete both keys
	created      bool   // a change of the batch created it
}

// plan builds the transaction of changes. refused holds the changes
// refused without a round trip (a fence that says this replica does not
// own the target; a second create of a name in one batch).
func (s *Store) plan(changes []*engine.Change) (p *plan, refused map[string]error, err error) {
	p = &plan{}
	refused = make(map[string]error)
	byName := make(map[string]*targetOps)
	type fenceKey struct {
		key   string
		lease clientv3.LeaseID
	}
	fences := make(map[fenceKey]*check)
	for i, c := range changes {
		t := byName[c.Name]
		if t == nil {
			t = &targetOps{}
			byName[c.Name] = t
			p.names = append(p.names, c.Name)
		}
		switch {
		case c.Create && t.created:
			refused[c.Name] = fmt.Errorf("target %q: created twice in one transaction: %w", c.Name, engine.ErrAlreadyExists)
		case c.Create && t.deleted:
			// Deleted earlier in this transaction (which compares what
			// the delete needs): nothing to compare.
		case c.Create:
			chk := &check{key: s.keys.Spec(c.Name), create: true, names: []string{c.Name}}
			p.checks = append(p.checks, chk)
			if c.Apply != nil {
				fk := fenceKey{s.keys.SetLock(c.Apply.Owner), clientv3.LeaseID(c.Apply.Token)}
				lock := fences[fk]
				if lock == nil {
					lock = &check{key: fk.key, lease: fk.lease, apply: true}
					fences[fk] = lock
					p.checks = append(p.checks, lock)
				}
				lock.names = append(lock.names, c.Name)
			}
		case s.fence != nil:
			key, lease, ok := s.fence(c.Name)
			if !ok {
				refused[c.Name] = fmt.Errorf("target %q: this replica does not own its shard: %w", c.Name, engine.ErrOwnershipLost)
				break
			}
			fk := fenceKey{key, lease}
			chk := fences[fk]
			if chk == nil {
				chk = &check{key: key, lease: lease}
				fences[fk] = chk
				p.checks = append(p.checks, chk)
			}
			if !slices.Contains(chk.names, c.Name) {
				chk.names = append(chk.names, c.Name)
			}
		}
		if c.Create {
			t.created = true
		}
		if err := s.fold(t, c, i); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range p.names {
		t := byName[name]
		switch {
		case t.deleted:
			p.ops = append(p.ops, clientv3.OpDelete(s.keys.Spec(name)), clientv3.OpDelete(s.keys.Status(name)))
			p.bytes += 2 * (len(s.keys.Spec(name)) + opOverhead)
		default:
			if t.spec != nil {
				p.ops = append(p.ops, clientv3.OpPut(s.keys.Spec(name), string(t.spec)))
				p.bytes += len(s.keys.Spec(name)) + len(t.spec) + opOverhead
			}
			if t.status != nil {
				p.ops = append(p.ops, clientv3.OpPut(s.keys.Status(name), string(t.status)))
				p.bytes += len(s.keys.Status(name)) + len(t.status) + opOverhead
			}
		}
	}
	batch, err := codec.MarshalBatch(changes)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd store: commit: %w", err)
	}
	p.ops = append(p.ops, clientv3.OpPut(s.keys.Events(), string(batch)))
	p.bytes += len(s.keys.Events()) + len(batch) + opOverhead
	for _, chk := range p.checks {
		p.bytes += 2 * (len(chk.key) + opOverhead) // the compare and the read of the other branch
	}
	p.bytes += 3 * (len(s.writers.key(MaxCommitsInFlight-1)) + opOverhead) // its writer key's compare, put and read
	if p.counts = s.count(changes); p.counts != nil {
		for _, key := range p.counts.keys {
			p.bytes += 3*(len(key)+opOverhead) + 20 // its compare, put and read; the value
		}
	}
	return p, refused, nil
}

// fold applies change c, the i-th of its transaction, to what the
// transaction writes for its target.
func (s *Store) fold(t *targetOps, c *engine.Change, i int) error {
	switch {
	case c.Delete:
		*t = targetOps{deleted: true}
		return nil
	case t.deleted && !c.SpecChanged:
		// A status-only change after the target's delete in this
		// transaction: its event is kept, its status is not (the
		// target is gone).
		return nil
	}
	if c.SpecChanged {
		b, err := codec.MarshalSpec(c.Target.Spec)
		if err != nil {
			return fmt.Errorf("etcd store: commit: spec of %q: %w", c.Name, err)
		}
		t.spec, t.deleted = b, false
	}
	// The stored status's revision is the change's index: its etcd
	// revision is the key's (see the package doc).
	st := c.Target.Status
	st.Revision = uint64(i)
	b, err := codec.MarshalStatus(&st)
	if err != nil {
		return fmt.Errorf("etcd store: commit: status of %q: %w", c.Name, err)
	}
	t.status = b
	return nil
}
