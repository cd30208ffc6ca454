package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/etcdtest"
)

// TestSoak churns five replicas on the real clock for PROBED_CLUSTER_SOAK
// (a duration; the test is skipped without it): replicas leave and come
// back, get stuck past their TTL and recover. Afterwards the shards must
// be owned as the assignment says, no shard key may ever have had two
// owners in etcd's history, and no shard two probing replicas.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("PROBED_CLUSTER_SOAK"))
	if err != nil {
		t.Skip("set PROBED_CLUSTER_SOAK=1m to churn replicas for a minute")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	e := newEnv(t, etcdtest.Start(t), clockwork.NewRealClock(), 1024)
	const ttl = 2 * time.Second
	edit := func(o *cluster.Options) { o.LeaseTTL = ttl; o.Settle = ttl }
	ids := []string{"a", "b", "c", "d", "e"}
	rs := map[string]*replica{}
	for _, id := range ids {
		rs[id] = e.start(id, edit)
	}
	actions := map[string]int{}
	for end := time.Now().Add(d); time.Now().Before(end); {
		id := ids[rng.IntN(len(ids))]
		r := rs[id]
		switch rng.IntN(4) {
		case 0: // leave, or come back
			if r.stop != nil && r.c.Stats().Lease != 0 {
				if err := r.stop(); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				rs[id] = &replica{id: id} // stopped
				actions["leave"]++
			} else if r.c == nil {
				rs[id] = e.start(id, edit)
				actions["join"]++
			}
		case 1: // stuck past the TTL, or recovered
			if r.c != nil {
				r.stuck.Store(!r.stuck.Load())
				actions[fmt.Sprintf("stuck=%v", r.stuck.Load())]++
			}
		}
		time.Sleep(time.Duration(rng.IntN(int(ttl))))
	}
	var live []string
	var running []*replica
	for _, id := range ids {
		r := rs[id]
		if r.c == nil {
			rs[id] = e.start(id, edit)
			r = rs[id]
		}
		r.stuck.Store(false)
		live = append(live, id)
		running = append(running, r)
	}
	t.Logf("actions: %v", actions)
	// Every replica live and unstuck: the assignment settles to the
	// desired one (waitOwners polls until it has).
	e.waitOwners(cluster.Desired(live, e.shards), running...)
	e.history()
	e.probing.check(t)
}
