package cluster

import (
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// owner is what the view knows of a shard's owner key.
type owner struct {
	id    string           // the owner's replica ID; "" when the key does not exist
	lease clientv3.LeaseID // the lease the key is attached to
	// rev is the revision of the last change of the key the view applied
	// (its claim, or its deletion): an older change is ignored, so that
	// the replica's own claims and releases, applied from their
	// responses, are not undone by the watch delivering what preceded
	// them.
	rev int64
}

// view is the state of the member and shard keys: a snapshot, then every
// change the watch delivers. The Cluster's mu guards it for readers; Run's
// goroutine is its only writer.
type view struct {
	keys    keyspace.Keys
	members map[string]*member
	owners  []owner
	held    map[clientv3.LeaseID]int // shards owned per lease
	rev     int64                    // the revision the view is at
	// bad reports a member key whose value cannot be read (the member
	// still counts, with no address and settled).
	bad func(id string, err error)
}

func newView(k keyspace.Keys) *view {
	return &view{
		keys:    k,
		members: make(map[string]*member),
		owners:  make([]owner, k.ShardCount()),
		held:    make(map[clientv3.LeaseID]int),
		bad:     func(string, error) {},
	}
}

// load replaces the view with a snapshot of the watched range at rev. It
// returns the shards that were held on lease mine and no longer are.
func (v *view) load(kvs []*mvccpb.KeyValue, rev int64, mine clientv3.LeaseID) (lost []int) {
	before := make([]owner, len(v.owners))
	copy(before, v.owners)
	clear(v.members)
	clear(v.held)
	for s := range v.owners {
		v.owners[s] = owner{rev: rev}
	}
	for _, kv := range kvs {
		v.put(kv)
	}
	v.rev = rev
	for s, o := range before {
		if mine != 0 && o.lease == mine && v.owners[s].lease != mine {
			lost = append(lost, s)
		}
	}
	return lost
}

// apply applies one event of the watch. It returns the shard the event
// took from lease mine, or -1.
func (v *view) apply(ev *clientv3.Event, mine clientv3.LeaseID) int {
	key := string(ev.Kv.Key)
	if s, ok := v.keys.ParseShard(key); ok {
		prev := v.owners[s]
		if ev.Kv.ModRevision <= prev.rev {
			return -1 // already known (the replica's own claim or release)
		}
		if ev.Type == clientv3.EventTypeDelete {
			v.setOwner(s, owner{rev: ev.Kv.ModRevision})
		} else {
			v.put(ev.Kv)
		}
		if mine != 0 && prev.lease == mine && v.owners[s].lease != mine {
			return s
		}
		return -1
	}
	if id, ok := v.keys.ParseMember(key); ok {
		if ev.Type == clientv3.EventTypeDelete {
			delete(v.members, id)
		} else {
			v.put(ev.Kv)
		}
	}
	return -1
}

// put records a key of the watched range as it now is.
func (v *view) put(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	if s, ok := v.keys.ParseShard(key); ok {
		v.setOwner(s, owner{id: string(kv.Value), lease: clientv3.LeaseID(kv.Lease), rev: kv.ModRevision})
		return
	}
	if id, ok := v.keys.ParseMember(key); ok {
		m, err := decodeMember(id, kv)
		if err != nil {
			v.bad(id, err)
			m = &member{id: id, lease: clientv3.LeaseID(kv.Lease)}
		}
		v.members[id] = m
	}
}

// setOwner sets shard s's owner, keeping the counts per lease.
func (v *view) setOwner(s int, o owner) {
	if prev := v.owners[s]; prev.id != "" {
		if v.held[prev.lease]--; v.held[prev.lease] <= 0 {
			delete(v.held, prev.lease)
		}
	}
	if o.id != "" {
		v.held[o.lease]++
	}
	v.owners[s] = o
}

// heldBy is the number of shards owned on lease.
func (v *view) heldBy(lease clientv3.LeaseID) int {
	if lease == 0 {
		return 0
	}
	return v.held[lease]
}

// shardsOf are the shards owned on lease, in order.
func (v *view) shardsOf(lease clientv3.LeaseID) []int {
	var ss []int
	for s, o := range v.owners {
		if lease != 0 && o.lease == lease {
			ss = append(ss, s)
		}
	}
	return ss
}

// sorted are the members in ID order.
func (v *view) sorted() []*member {
	ms := make([]*member, 0, len(v.members))
	for _, m := range v.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.id, b.id) })
	return ms
}
