package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// A three-member etcd cluster loses its leader (a crash: no leadership
// transfer): the members elect another within the lease TTL, leases
// survive, every replica keeps renewing through the new leader, and no
// shard changes hands: no Gain, no Lose, no write of a shard key.
func TestEtcdLosesItsLeader(t *testing.T) {
	etcd := etcdtest.StartCluster(t, 3, etcdtest.Options{TickMs: 50, ElectionMs: 500})
	e := newEnv(t, etcd, clockwork.NewRealClock(), 256)
	// With a 500 ms election timeout a new leader takes 0.5–1 s, within a
	// 3 s TTL (renewals every second, the watchdog at 2.5 s).
	edit := func(o *cluster.Options) { o.LeaseTTL = 3 * time.Second }
	rs := []*replica{e.start("a", edit), e.start("b", edit), e.start("c", edit)}
	abc := cluster.Desired([]string{"a", "b", "c"}, e.shards)
	e.waitOwners(abc, rs...)
	before := e.history()
	type snapshot struct {
		st           cluster.Stats
		gains, loses int
	}
	snap := func(r *replica) snapshot {
		g, l := r.calls()
		return snapshot{r.c.Stats(), len(g), len(l)}
	}
	was := make([]snapshot, len(rs))
	for i, r := range rs {
		was[i] = snap(r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old, err := etcd.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	etcd.Kill(old)
	leader, err := etcd.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd member %d (the leader) killed; %d leads %v later", old, leader, time.Since(start))
	// Three renewals each after the new leader: a TTL.
	renewed := make([]uint64, len(rs))
	for i, r := range rs {
		renewed[i] = r.c.Stats().Renewals
	}
	waitFor(t, "renewals through the new leader", func() string {
		for i, r := range rs {
			if got := r.c.Stats().Renewals; got < renewed[i]+3 {
				return fmt.Sprintf("%s renewed %d times since", r.id, got-renewed[i])
			}
		}
		return ""
	})
	e.barrier(rs...)
	for i, r := range rs {
		now := snap(r)
		if now.st.Lease != was[i].st.Lease || now.st.LeaseLosses != 0 || now.gains != was[i].gains || now.loses != was[i].loses || now.st.Shards != was[i].st.Shards {
			t.Errorf("%s: before the leader died %+v, after %+v", r.id, was[i], now)
		}
	}
	if diff := cluster.OwnersDiff(e.owners(), abc); diff != "" {
		t.Errorf("owners after the leader died: %s", diff)
	}
	if after := e.history(); !slices.EqualFunc(before, after, slices.Equal) {
		t.Errorf("shard keys were written after the leader died")
	}
	e.probing.check(t)
}
