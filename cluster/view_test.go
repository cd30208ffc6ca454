package cluster

import (
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

func shardKV(k keyspace.Keys, s int, id string, lease, rev int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(k.Shard(s)), Value: []byte(id), Lease: lease, ModRevision: rev, CreateRevision: rev, Version: 1}
}

func memberKV(k keyspace.Keys, id, addr string, joined time.Time, lease, rev int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(k.Member(id)), Value: []byte(keyspace.Member{Addr: addr, Joined: joined}.Encode()), Lease: lease, ModRevision: rev}
}

func put(kv *mvccpb.KeyValue) *clientv3.Event {
	return &clientv3.Event{Type: clientv3.EventTypePut, Kv: kv}
}

func del(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

func TestViewFollowsTheKeys(t *testing.T) {
	k := keyspace.New("/p/", 8)
	joined := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := newView(k)
	var bad []string
	v.bad = func(id string, _ error) { bad = append(bad, id) }
	const mine, theirs = 7, 9
	lost := v.load([]*mvccpb.KeyValue{
		memberKV(k, "a", "a:1", joined, mine, 2),
		memberKV(k, "b", "b:1", joined, theirs, 3),
		{Key: []byte(k.Member("z")), Value: []byte("not json"), Lease: 11, ModRevision: 3},
		{Key: []byte(k.Meta()), Value: []byte(`{"shards":8}`), ModRevision: 1},
		shardKV(k, 0, "a", mine, 4),
		shardKV(k, 1, "b", theirs, 4),
	}, 5, mine)
	if len(lost) != 0 || v.rev != 5 || len(v.members) != 3 || v.heldBy(mine) != 1 || v.heldBy(theirs) != 1 {
		t.Fatalf("after load: lost %v, rev %d, members %d, held %d/%d", lost, v.rev, len(v.members), v.heldBy(mine), v.heldBy(theirs))
	}
	if z := v.members["z"]; !slices.Equal(bad, []string{"z"}) || z.addr != "" || !z.joined.IsZero() {
		t.Errorf("unreadable member: reported %v, kept as %+v; want reported, kept with no address, settled", bad, z)
	}

	// The replica's own claim at 8, applied from its response, is not
	// undone by the watch delivering the earlier deletion (6) of the key.
	v.setOwner(2, owner{id: "a", lease: mine, rev: 8})
	if s := v.apply(del(k.Shard(2), 6), mine); s != -1 || v.owners[2].lease != mine {
		t.Fatalf("an older deletion undid the claim: lost %d, owner %+v", s, v.owners[2])
	}
	if s := v.apply(put(shardKV(k, 2, "a", mine, 8)), mine); s != -1 || v.heldBy(mine) != 2 {
		t.Fatalf("the claim's own event: lost %d, held %d", s, v.heldBy(mine))
	}
	// A deletion of a key of mine that the replica did not make is a loss.
	if s := v.apply(del(k.Shard(0), 9), mine); s != 0 || v.owners[0].id != "" || v.heldBy(mine) != 1 {
		t.Fatalf("deleted key of mine: lost %d, owner %+v, held %d", s, v.owners[0], v.heldBy(mine))
	}
	if s := v.apply(put(shardKV(k, 0, "b", theirs, 10)), mine); s != -1 || v.heldBy(theirs) != 2 {
		t.Fatalf("b's claim: lost %d, held %d", s, v.heldBy(theirs))
	}
	v.apply(del(k.Member("b"), 11), mine)
	if _, ok := v.members["b"]; ok {
		t.Fatal("a deleted member is still in the view")
	}
	// A snapshot (after a compaction) reports what was lost meanwhile.
	lost = v.load([]*mvccpb.KeyValue{memberKV(k, "a", "a:1", joined, mine, 2), shardKV(k, 5, "a", mine, 12)}, 20, mine)
	if !slices.Equal(lost, []int{2}) || !slices.Equal(v.shardsOf(mine), []int{5}) || v.heldBy(theirs) != 0 {
		t.Fatalf("snapshot: lost %v, mine %v, theirs %d", lost, v.shardsOf(mine), v.heldBy(theirs))
	}
	if _, ok := k.ParseShard(k.Prefix() + "shards/12"); ok {
		t.Error("a shard key of another width parses")
	}
	if _, ok := k.ParseShard(k.Prefix() + "shards/0008"); ok {
		t.Error("shard 8 of 8 parses")
	}
}
