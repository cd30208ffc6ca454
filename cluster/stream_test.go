package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// The view follows the store's follow (Observe), the replica's one etcd
// watch. When that follow starts again past revisions the view has not
// seen (the engine reloaded its view after a compaction), the view
// reloads the keys from etcd: a replica whose follow missed another's
// join hands that one its shards all the same.
func TestViewReloadsAfterAGapInTheStream(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 64)
	a := e.start("a", nil)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)

	a.feed() // a's view stops here
	b := e.start("b", nil)
	waitFor(t, "b to be a member", func() string {
		for _, m := range b.c.Members() {
			if m.ID == "b" {
				return ""
			}
		}
		return "not yet"
	})
	if got := len(a.c.Members()); got != 1 {
		t.Fatalf("a's view has %d members without its follow, want 1", got)
	}
	// Followed again from etcd's revision now: b's join is behind it.
	a.feed = startFeed(t, e.etcd.Client(t), e.prefix, "a", a.c)
	e.waitOwners(cluster.Desired([]string{"a", "b"}, e.shards), a, b)
	if !a.log.has("reloaded the member and shard keys") {
		t.Error("a did not say it reloaded its view")
	}
	e.probing.check(t)
}

// Ownership follows the stream: a shard key deleted behind its owner's
// back (etcdctl) is dropped when the stream brings the delete — Drop with
// that shard, no Lose (nothing to flush: the fence refuses its writes) —
// and the shard, claimed again, is gained at the new claim's revision.
func TestStreamDropsAndGainsAShard(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 16)
	a := e.start("a", nil)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	waitFor(t, "a to gain every shard", func() string {
		gains, _ := a.calls()
		n := 0
		for _, g := range gains {
			n += len(g.shards)
		}
		if n != e.shards {
			return fmt.Sprintf("%d shards gained", n)
		}
		return ""
	})
	gainsBefore, losesBefore := a.calls()
	resp, err := e.cli.Delete(context.Background(), e.prefix+"shards/0003")
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("delete shard 3's key: %v (%d deleted)", err, resp.Deleted)
	}
	waitFor(t, "a to drop shard 3, then gain it again", func() string {
		gains, _ := a.calls()
		if drops := a.dropped(); len(drops) != 1 || !slices.Equal(drops[0], []int{3}) {
			return fmt.Sprintf("drops %v", drops)
		}
		if gains = gains[len(gainsBefore):]; len(gains) != 1 || !slices.Equal(gains[0].shards, []int{3}) {
			return fmt.Sprintf("gains since %+v", gains)
		}
		if gains[0].rev <= resp.Header.Revision {
			return fmt.Sprintf("gained at %d, the delete was at %d", gains[0].rev, resp.Header.Revision)
		}
		return ""
	})
	if _, loses := a.calls(); len(loses) != len(losesBefore) {
		t.Errorf("Lose calls after the delete: %+v; want none", loses[len(losesBefore):])
	}
	if !a.c.Owns(e.names[3]) {
		t.Error("a does not own shard 3's target after claiming it again")
	}
	e.probing.check(t)
}

// The stream may bring a replica's claim before the claim's own answer
// comes back. From then on the engine probes the shard's targets (Gain),
// so their writes must not be refused by the fence for a view still short
// of the claim: a refused write drops the target, and nothing would gain
// it again (the stream already showed the claim). Fence holds wherever
// Owns does. The claim's answer is held back here until Gain has looked.
func TestFenceHoldsOnceTheStreamBringsTheClaim(t *testing.T) {
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 16)
	var (
		cl      atomic.Pointer[cluster.Cluster]
		started = make(chan struct{})
		release = make(chan struct{})
		once    sync.Once
		mu      sync.Mutex
		unowned []string // gained shards' targets Owns or Fence refused
	)
	a := e.start("a", func(o *cluster.Options) {
		held := &heldClaims{KV: o.Client.KV, prefix: e.prefix + "shards/", release: release}
		o.Client.KV = held
		gain := o.Gain
		o.Gain = func(shards []int, rev int64) {
			gain(shards, rev)
			once.Do(func() {
				defer close(release)
				<-started
				c := cl.Load()
				mu.Lock()
				defer mu.Unlock()
				for _, s := range shards {
					name := e.names[s]
					if _, _, ok := c.Fence(name); !ok || !c.Owns(name) {
						unowned = append(unowned, fmt.Sprintf("shard %d: Owns %t, Fence %t", s, c.Owns(name), ok))
					}
				}
			})
		}
	})
	cl.Store(a.c)
	close(started)
	e.waitOwners(cluster.Desired([]string{"a"}, e.shards), a)
	select {
	case <-release:
	default:
		t.Fatal("a owns its shards, and no Gain ran while a claim's answer was held")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(unowned) > 0 {
		t.Errorf("gained from the stream with the claim's answer held back: %v", unowned)
	}
}

// heldClaims is a client's KV that holds back the answer of each
// transaction putting a key under prefix (a claim) until release is
// closed: the transaction is applied at once, as etcd answers late.
type heldClaims struct {
	clientv3.KV
	prefix  string
	release <-chan struct{}
}

func (kv *heldClaims) Txn(ctx context.Context) clientv3.Txn {
	return &heldTxn{Txn: kv.KV.Txn(ctx), kv: kv}
}

type heldTxn struct {
	clientv3.Txn
	kv    *heldClaims
	claim bool
}

func (t *heldTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *heldTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.claim = t.claim || t.kv.puts(ops)
	t.Txn = t.Txn.Then(ops...)
	return t
}

// puts reports whether ops (or the transactions among them) put a key
// under the prefix.
func (kv *heldClaims) puts(ops []clientv3.Op) bool {
	for _, op := range ops {
		if op.IsTxn() {
			_, then, els := op.Txn()
			if kv.puts(then) || kv.puts(els) {
				return true
			}
		}
		if op.IsPut() && strings.HasPrefix(string(op.KeyBytes()), kv.prefix) {
			return true
		}
	}
	return false
}

func (t *heldTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *heldTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if t.claim {
		<-t.kv.release
	}
	return resp, err
}
