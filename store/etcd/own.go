package etcd

import (
	"context"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/keyspace"
)

// Ownership (Options.Shards): a replica owns the shards whose owner keys
// are held on the lease of its process's member key — P/members/<id>
// whose value names Options.Instance —, as the log says. The member and
// shard keys are in Follow's one watch: Load reads them at its revision,
// Follow applies their events revision by revision and delivers the
// engine's ownership wherever it changed (engine.Delivery.Owned), at the
// revision of the claim, release or loss. Commit fences the writes of a
// target with the same table: the transaction compares the shard key's
// lease with the one the log has it on, and a target the log does not
// show owned is refused without a round trip.
//
// A member key that names another instance (this process's predecessor
// under the same replica ID, whose lease has not expired yet, or a
// duplicate) is not this process's: the shards on its lease are not
// owned. A deleted member key leaves the lease this process's (a replica
// that leaves deletes its member key first, then releases its shards
// and flushes their writes, which must still be fenced in).

// owners is the ownership as of a revision of the log.
type owners struct {
	keys     keyspace.Keys
	id       string // Options.ReplicaID
	instance string // Options.Instance
	// mine is the lease of this process's member key, as last put (0:
	// none).
	mine clientv3.LeaseID
	// held is each shard key's owner and lease (zero: no key).
	held []heldKey
}

type heldKey struct {
	id    string
	lease clientv3.LeaseID
}

func newOwners(keys keyspace.Keys, id, instance string) *owners {
	return &owners{keys: keys, id: id, instance: instance, held: make([]heldKey, keys.ShardCount())}
}

// load makes o the member and shard keys kvs (the membership range).
func (o *owners) load(kvs []*mvccpb.KeyValue) {
	o.mine = 0
	clear(o.held)
	for _, kv := range kvs {
		o.put(kv)
	}
}

// put records a key of the membership range as it now is; true if it
// may change what o owns.
func (o *owners) put(kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	if s, ok := o.keys.ParseShard(key); ok {
		o.held[s] = heldKey{id: string(kv.Value), lease: clientv3.LeaseID(kv.Lease)}
		return true
	}
	if id, ok := o.keys.ParseMember(key); ok && id == o.id {
		m, err := keyspace.DecodeMember(kv.Value)
		mine := clientv3.LeaseID(0)
		if err == nil && m.Instance == o.instance {
			mine = clientv3.LeaseID(kv.Lease)
		}
		changed := mine != o.mine
		o.mine = mine
		return changed
	}
	return false
}

// apply applies the events of one revision; true if what o owns may have
// changed.
func (o *owners) apply(events []*clientv3.Event) bool {
	changed := false
	for _, ev := range events {
		if ev.Type == clientv3.EventTypeDelete {
			if s, ok := o.keys.ParseShard(string(ev.Kv.Key)); ok {
				o.held[s] = heldKey{}
				changed = true
			}
			continue // a deleted member key leaves the lease this process's
		}
		changed = o.put(ev.Kv) || changed
	}
	return changed
}

// leases is the lease each shard is owned on (0: not owned).
func (o *owners) leases() []clientv3.LeaseID {
	out := make([]clientv3.LeaseID, len(o.held))
	if o.mine == 0 {
		return out
	}
	for s, k := range o.held {
		if k.lease == o.mine && k.id == o.id {
			out[s] = o.mine
		}
	}
	return out
}

// ownership is the engine's ownership of leases (owners.leases).
func (s *Store) ownership(leases []clientv3.LeaseID) *engine.Ownership {
	o := &engine.Ownership{ShardOf: s.keys.ShardOf, Owned: make([]bool, len(leases))}
	for sh, l := range leases {
		o.Owned[sh] = l != 0
	}
	return o
}

// fenceWith makes leases (owners.leases) what Commit fences writes with;
// false if they are what it was.
func (s *Store) fenceWith(leases []clientv3.LeaseID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.leases, leases) {
		return false
	}
	s.leases = leases
	return true
}

// fenceOf is what a write of the named target compares: its shard's key,
// to be held on lease. ok false: the log does not show this replica
// owning the shard.
func (s *Store) fenceOf(name string) (key string, lease clientv3.LeaseID, ok bool) {
	sh := s.keys.ShardOf(name)
	s.mu.Lock()
	if sh < len(s.leases) {
		lease = s.leases[sh]
	}
	s.mu.Unlock()
	return s.keys.Shard(sh), lease, lease != 0
}

// readOwners reads the member and shard keys at etcd revision rev.
func (s *Store) readOwners(ctx context.Context, rev int64) (*owners, error) {
	o := newOwners(s.keys, s.id, s.process)
	var kvs []*mvccpb.KeyValue
	start, end := s.keys.Membership()
	err := s.readRange(ctx, start, end, rev, func(kv *mvccpb.KeyValue) error {
		kvs = append(kvs, kv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	o.load(kvs)
	return o, nil
}
