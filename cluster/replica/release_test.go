package replica_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster/replica"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	storeetcd "github.com/probed/probed/store/etcd"
)

// shardOwners is each shard's owner replica ID, as etcd has it now.
func shardOwners(t *testing.T, cli *clientv3.Client, prefix string) map[int]string {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix+"shards/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		s, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix+"shards/"))
		if err != nil {
			t.Fatalf("shard key %q", kv.Key)
		}
		out[s] = string(kv.Value)
	}
	return out
}

// ownedBy waits until etcd's 16 shard keys are held as want says (each
// member's count) and each member's cluster counts as many.
func ownedBy(t *testing.T, cli *clientv3.Client, prefix string, want map[*member]int) {
	t.Helper()
	poll.UntilMet(t, "the shards to settle", 30*time.Second, func() string {
		owners := shardOwners(t, cli, prefix)
		if len(owners) != 16 {
			return fmt.Sprintf("%d shard keys", len(owners))
		}
		for m, n := range want {
			held := 0
			for _, id := range owners {
				if id == m.id {
					held++
				}
			}
			if held != n && n >= 0 || n < 0 && held == 0 {
				return fmt.Sprintf("%s holds %d shard keys", m.id, held)
			}
			if st := m.b.Cluster().Stats(); st.Shards != held {
				return fmt.Sprintf("%s counts %d shards, etcd has %d", m.id, st.Shards, held)
			}
		}
		return ""
	})
}

// releaseRace delivers one create to a member while the member releases
// the create's shard: the member's Release (announced to its engine) has
// stopped the shard's targets and the key's delete has been answered,
// and the stream has not brought the delete yet. It holds what the
// store's follow hands the cluster (Observe) from the newcomer's join on,
// and the delivery of the create, so that the member's cluster learns of
// the newcomer, and releases to it, only once the create is held.
//
// The first version of this test made the interleaving that the old
// ownership left open: the follow found the create owned (the cluster's
// Owns, a hook of the test's) before the release began, and took the
// target after the release's Lose had passed over it — a second prober.
// That seam is gone: the engine now registers and takes a created target
// in one step, under the lock Release takes too, so the create comes
// either before the release (and is stopped by it) or after (and is not
// taken); the test delivers it after, with the shard's key still on the
// member's lease.
type releaseRace struct {
	cli *clientv3.Client

	mu       sync.Mutex
	name     string // the target; "" until armed
	shardKey string
	member   string // the releasing member's ID (its shard keys' value)
	joiner   string // the newcomer's member key
	deferred []func()
	holding  bool
	released bool          // the member's Release returned since the test armed the race
	joined   chan struct{} // closed when the newcomer's join was held
	applied  chan struct{} // closed when the create was delivered, after the release
	err      error
}

// membership holds, once armed, the newcomer's join and everything after
// it until the create arrives.
func (r *releaseRace) membership(observe func(after, rev int64, events []*clientv3.Event)) func(after, rev int64, events []*clientv3.Event) {
	return func(after, rev int64, events []*clientv3.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.holding && r.joiner != "" && slices.ContainsFunc(events, func(ev *clientv3.Event) bool {
			return ev.Type == clientv3.EventTypePut && string(ev.Kv.Key) == r.joiner
		}) {
			r.holding = true
			close(r.joined)
		}
		if r.holding {
			r.deferred = append(r.deferred, func() { observe(after, rev, events) })
			return
		}
		observe(after, rev, events)
	}
}

// engine notes when the member's Release returned.
func (r *releaseRace) engine(eng replica.Engine) replica.Engine {
	return &releasing{Engine: eng, race: r}
}

type releasing struct {
	replica.Engine
	race *releaseRace
}

func (e *releasing) Release(ctx context.Context, shards []int) error {
	err := e.Engine.Release(ctx, shards)
	e.race.mu.Lock()
	e.race.released = true
	e.race.mu.Unlock()
	return err
}

// hold holds the delivery of the create: it hands the cluster the join,
// and delivers the create once the release it brings has returned and
// its delete has been answered (the shard's key is gone from etcd), before
// the stream goes on to that delete.
func (r *releaseRace) hold(d engine.Delivery, deliver func()) {
	r.mu.Lock()
	if r.name == "" || !r.holding || !slices.ContainsFunc(d.Changes, func(c *engine.Change) bool { return c.Name == r.name }) {
		r.mu.Unlock()
		deliver()
		return
	}
	deferred := r.deferred
	r.deferred, r.holding, r.name = nil, false, ""
	r.mu.Unlock()
	for _, observe := range deferred {
		observe()
	}
	// The key leaves the member once the release deletes it; the
	// newcomer may claim it at once (it follows etcd unheld), so "not
	// the member's" is the test, not "absent": a poll can miss the
	// moment between the delete and the claim.
	err := poll.Wait("the release to delete "+r.shardKey, 30*time.Second, func() bool {
		r.mu.Lock()
		released := r.released
		r.mu.Unlock()
		resp, err := r.cli.Get(r.cli.Ctx(), r.shardKey)
		return released && err == nil && (len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != r.member)
	})
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	deliver()
	close(r.applied)
}

// A target created while its shard is being released is probed by one
// replica, the new owner: the old owner, which released the shard, does
// not take it up after its release stopped the shard's targets (before,
// the follow's own-on-create decided ownership, then took the target,
// with the release free to stop the shard's targets in between: it
// passed over the target, not owned yet, and the target was then owned
// for good — a steady target probed by two replicas). See releaseRace.
func TestTargetCreatedDuringAReleaseHasOneOwner(t *testing.T) {
	etcd := etcdtest.Start(t)
	const prefix = "/probed/"
	ctx := t.Context()
	cli := etcd.Client(t)
	w := startWriter(t, etcd, prefix)
	race := &releaseRace{cli: cli, joined: make(chan struct{}), applied: make(chan struct{})}
	// a's follow is held while b settles and a releases to it: its view
	// stands still meanwhile, which a lease of 2 s would not survive on a
	// loaded machine (the heartbeat requires the view to follow etcd
	// within a TTL).
	a := startMemberWith(t, etcd, prefix, "a", hooks{
		ttl:        10 * time.Second,
		wrap:       func(s *storeetcd.Store) engine.Store { return &gated{Store: s, hold: race.hold} },
		engine:     race.engine,
		membership: race.membership,
	})
	ownsEveryShard(t, a)

	// Which shards go to b: b joins, takes them, and leaves again.
	b := startMember(t, etcd, prefix, "b")
	ownedBy(t, cli, prefix, map[*member]int{b: -1})
	var toB []int
	for s, id := range shardOwners(t, cli, prefix) {
		if id == "b" {
			toB = append(toB, s)
		}
	}
	b.leave()
	ownedBy(t, cli, prefix, map[*member]int{a: 16})

	// The target, in a shard that goes to b again.
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("target-%d", i); slices.Contains(toB, a.b.Cluster().ShardOf(n)) {
			name = n
		}
	}
	race.mu.Lock()
	race.name = name
	race.shardKey = fmt.Sprintf("%sshards/%04d", prefix, a.b.Cluster().ShardOf(name))
	race.joiner = prefix + "members/b"
	race.member = "a"
	race.released = false // a released to b before, when b first joined
	race.mu.Unlock()

	b2 := startMember(t, etcd, prefix, "b")
	select {
	case <-race.joined:
	case <-time.After(30 * time.Second):
		t.Fatal("b's join never reached a's follow")
	}
	if _, err := w.Create(ctx, &target.Spec{Name: name}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	select {
	case <-race.applied:
	case <-time.After(60 * time.Second):
		t.Fatal("the create never reached a's follow during the release")
	}
	race.mu.Lock()
	err := race.err
	race.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	poll.UntilMet(t, "b to probe "+name, 30*time.Second, func() string {
		switch got, err := b2.owns(ctx, name); {
		case err != nil:
			return err.Error()
		case !got:
			return "not yet"
		}
		return ""
	})
	if got, err := a.owns(ctx, name); err != nil || got {
		t.Errorf("%s: probed by a (%v, err %v) after a released its shard to b, which probes it: two probers", name, got, err)
	}
}
