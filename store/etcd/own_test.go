package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/internal/poll"
)

// owning follows a store and records the ownership it delivers.
type owning struct {
	mu    sync.Mutex
	owned map[uint64][]int // position → shards owned from there
	pos   uint64           // the last position delivered
}

func (o *owning) deliver(d engine.Delivery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pos = d.Pos
	if d.Owned == nil {
		return
	}
	var shards []int
	for s, ok := range d.Owned.Owned {
		if ok {
			shards = append(shards, s)
		}
	}
	o.owned[d.Pos] = shards
}

// at waits until the follow has reached etcd revision rev and returns
// the ownership delivered there (false: none).
func (o *owning) at(t *testing.T, rev int64) ([]int, bool) {
	t.Helper()
	pos := keyspace.Position(rev)
	poll.Until(t, fmt.Sprintf("the follow to reach revision %d", rev), 20*time.Second, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.pos >= pos
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	shards, ok := o.owned[pos]
	return shards, ok
}

// The store follows its replica's ownership in its log: the shards whose
// owner keys are on the lease of the member key naming its process, from
// the revision of their claim (Follow delivers the ownership there) to
// that of their loss; and it fences writes with what its log shows —
// accepted once the log brings a claim, refused without a round trip
// once it brings the loss. A member key under the replica's ID that
// names another process (a predecessor whose lease has not expired, a
// duplicate) owns nothing for it.
func TestOwnershipFollowsTheLog(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	keys := keyspace.New("", 4)
	lease, opts := member(t, cli, "", 4, "a")
	s := open(t, cli, opts)
	st := load(t, s)
	if st.Ownership == nil || slices.Contains(st.Ownership.Owned, true) || len(st.Ownership.Owned) != 4 {
		t.Fatalf("Load: ownership %+v, want 4 shards, none owned", st.Ownership)
	}
	o := &owning{owned: make(map[uint64][]int)}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() { followed <- s.Follow(ctx, st.Revision, o.deliver) }()
	t.Cleanup(func() {
		cancel()
		if err := <-followed; err != nil {
			t.Errorf("Follow: %v", err)
		}
	})
	name := func(shard int) string {
		for i := 0; ; i++ {
			if n := fmt.Sprintf("t%d", i); keyspace.ShardOf(n, 4) == shard {
				return n
			}
		}
	}
	put := func(l clientv3.LeaseID, id string, shards ...int) int64 {
		t.Helper()
		var ops []clientv3.Op
		for _, sh := range shards {
			ops = append(ops, clientv3.OpPut(keys.Shard(sh), id, clientv3.WithLease(l)))
		}
		resp, err := cli.Txn(t.Context()).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}

	// a claims shards 1 and 2: owned from the claim's revision on.
	claimed := put(lease, "a", 1, 2)
	if shards, ok := o.at(t, claimed); !ok || !slices.Equal(shards, []int{1, 2}) {
		t.Fatalf("at the claim: ownership %v (%t), want shards 1 and 2", shards, ok)
	}
	web := create(name(1))
	commit(t, s, web)
	commit(t, s, transition(web, 1)) // fenced in: the key is on a's lease

	// Another replica's claim of shard 3 changes nothing of a's.
	other, err := cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.at(t, put(other.ID, "b", 3)); ok {
		t.Errorf("another replica's claim delivered an ownership of a's")
	}

	// Shard 1's key is deleted behind a's back: no longer owned from the
	// delete's revision, and its writes are refused without a round trip.
	del, err := cli.Delete(t.Context(), keys.Shard(1))
	if err != nil {
		t.Fatal(err)
	}
	if shards, ok := o.at(t, del.Header.Revision); !ok || !slices.Equal(shards, []int{2}) {
		t.Fatalf("at the delete: ownership %v (%t), want shard 2", shards, ok)
	}
	before := currentRevision(t, cli)
	err = s.Commit(t.Context(), []*engine.Change{transition(web, 2)})
	if why := refusals(t, err)[web.Name]; !errors.Is(why, engine.ErrOwnershipLost) {
		t.Errorf("Commit after the loss: %v, want ErrOwnershipLost", why)
	}
	if rev := currentRevision(t, cli); rev != before {
		t.Errorf("the refused change reached etcd (revision %d to %d)", before, rev)
	}

	// Another process takes the replica ID (a's member key is gone, and
	// the new one names another instance): a owns nothing, not even the
	// shard still on its old lease.
	if _, err := cli.Delete(t.Context(), keys.Member("a")); err != nil {
		t.Fatal(err)
	}
	_, imposter := member(t, cli, "", 4, "a")
	resp, err := cli.Get(t.Context(), keys.Member("a"))
	if err != nil {
		t.Fatal(err)
	}
	if shards, ok := o.at(t, resp.Kvs[0].ModRevision); !ok || len(shards) != 0 {
		t.Errorf("once another process took the ID: ownership %v (%t), want none", shards, ok)
	}
	if st := load(t, open(t, cli, imposter)); slices.Contains(st.Ownership.Owned, true) {
		t.Errorf("the other process owns %v of a's old lease", st.Ownership.Owned)
	}
}
