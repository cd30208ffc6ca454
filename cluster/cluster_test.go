package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// Three replicas share the shards evenly, each shard owned once; a fourth
// takes about a quarter of them once it has settled, not before, and
// none is ever owned twice; a replica that leaves hands its shards over
// after Release returned. The fake clock decides when a member settles;
// leases are long, so that etcd expires none meanwhile.
func TestReplicasShareShardsAndHandThemOver(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, etcdtest.Start(t), clock, cluster.DefaultShards)
	const settle = 20 * time.Second
	edit := func(o *cluster.Options) { o.Settle = settle }
	a, b, c := e.start("a", edit), e.start("b", edit), e.start("c", edit)
	abc := cluster.Desired([]string{"a", "b", "c"}, e.shards)
	e.waitOwners(abc, a, b, c)

	t.Run("each shard owned once, evenly", func(t *testing.T) {
		total := 0
		for _, r := range []*replica{a, b, c} {
			n := r.c.Stats().Shards
			total += n
			if mean := float64(e.shards) / 3; math.Abs(float64(n)-mean) > 0.1*mean {
				t.Errorf("%s owns %d shards, want %.0f ± 10%%", r.id, n, mean)
			}
		}
		if total != e.shards {
			t.Errorf("the replicas own %d shards in all, want %d", total, e.shards)
		}
		checkOwnership(t, e, abc, a, b, c)
	})
	waitLeading(t, a, b, c)
	t.Run("members", func(t *testing.T) {
		got := a.c.Members()
		if len(got) != 3 {
			t.Fatalf("Members: %+v, want a, b and c", got)
		}
		for i, id := range []string{"a", "b", "c"} {
			m := got[i]
			if m.ID != id || m.Addr != id+".example:50051" || !m.Joined.Equal(clock.Now()) || m.Shards != count(abc, id) {
				t.Errorf("Members()[%d] = %+v, want %s with %d shards, joined %v", i, m, id, count(abc, id), clock.Now())
			}
		}
	})

	clock.Advance(settle) // a, b and c settle
	d := e.start("d", edit)
	waitFor(t, "every replica to see d", func() string {
		for _, r := range []*replica{a, b, c, d} {
			if n := len(r.c.Members()); n != 4 {
				return r.id + " does not see four members"
			}
		}
		return ""
	})
	e.barrier(a, b, c, d)
	if diff := cluster.OwnersDiff(e.owners(), abc); diff != "" {
		t.Fatalf("shards moved before d settled: %s", diff)
	}
	if gains, _ := d.calls(); len(gains) != 0 {
		t.Fatalf("d gained shards before it settled: %v", gains)
	}

	clock.Advance(settle) // d settles
	abcd := cluster.Desired([]string{"a", "b", "c", "d"}, e.shards)
	e.waitOwners(abcd, a, b, c, d)
	moved := 0
	for s := range abc {
		if abc[s] != abcd[s] {
			moved++
		}
	}
	if frac := float64(moved) / float64(e.shards); frac < 0.2 || frac > 0.3 {
		t.Errorf("d took %d shards (%.2f), want about a quarter", moved, frac)
	}
	if got := d.c.Stats().Shards; got != moved {
		t.Errorf("d owns %d shards, want the %d that moved", got, moved)
	}
	checkOwnership(t, e, abcd, a, b, c, d)

	// a leaves: its shards go to their next desired owners.
	_, losesBefore := a.calls()
	if err := a.stop(); err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	_, loses := a.calls()
	if len(loses) != len(losesBefore)+1 {
		t.Fatalf("a's Run ended with %d Release calls, want 1", len(loses)-len(losesBefore))
	}
	last := loses[len(loses)-1]
	if n := len(last.shards); n != count(abcd, "a") || last.held != n || last.streamed != n {
		t.Errorf("a's last Release: %d shards, %d keys held, %d owned in its log; want %d shards, all held and owned",
			n, last.held, last.streamed, count(abcd, "a"))
	}
	bcd := cluster.Desired([]string{"b", "c", "d"}, e.shards)
	e.waitOwners(bcd, b, c, d)
	waitLeading(t, b, c, d)
	for s := range abcd {
		if abcd[s] != "a" && bcd[s] != abcd[s] {
			t.Fatalf("shard %d moved from %s to %s when a left", s, abcd[s], bcd[s])
		}
	}
	if st := a.c.Stats(); st.Lease != 0 || st.Shards != 0 {
		t.Errorf("a after Run: %+v; want no lease, no shard", st)
	}
	for s := range abcd {
		if a.probes(s) {
			t.Fatalf("a probes shard %d after it left", s)
		}
	}
	resp, err := e.cli.Get(context.Background(), e.prefix+"members/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 3 {
		t.Errorf("member keys after a left: %v, %v; want b, c, d", resp.Kvs, err)
	}
	e.history()
	e.probing.check(t)
	for _, r := range []*replica{b, c, d} {
		if err := r.stop(); err != nil {
			t.Errorf("%s's Run: %v", r.id, err)
		}
	}
	if owners := e.owners(); slices.ContainsFunc(owners, func(o string) bool { return o != "" }) {
		t.Errorf("shards still owned after every replica left")
	}
	noClusterGoroutines(t)
}

// waitLeading waits until exactly one of rs leads (and none of the
// others).
func waitLeading(t *testing.T, rs ...*replica) {
	t.Helper()
	waitFor(t, "one leader", func() string {
		var leading []string
		for _, r := range rs {
			if r.c.Leading() {
				leading = append(leading, r.id)
			}
		}
		if len(leading) != 1 {
			return fmt.Sprintf("leading: %v", leading)
		}
		return ""
	})
}

// checkOwnership checks what each replica probes (its store's log) and
// its Owner against the owners etcd holds.
func checkOwnership(t *testing.T, e *env, owners []string, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		for s, name := range e.names {
			mine := owners[s] == r.id
			if got := r.probes(s); got != mine {
				t.Fatalf("%s probes shard %d of %s: %v", r.id, s, owners[s], got)
			}
			m, ok := r.c.Owner(name)
			if !ok || m.ID != owners[s] || m.Addr != owners[s]+".example:50051" {
				t.Fatalf("%s.Owner(%q) = %+v, %v, want %s", r.id, name, m, ok, owners[s])
			}
		}
	}
}

func count(owners []string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}

var _ = errors.Is
