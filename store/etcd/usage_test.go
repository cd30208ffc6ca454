package etcd_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// counts returns the counts of targets in etcd (P/usage/, but the
// repair mark), by the key's name under P/usage/.
func counts(t *testing.T, cli *clientv3.Client) map[string]int {
	t.Helper()
	resp, err := cli.Get(t.Context(), "/probed/usage/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)[len("/probed/usage/"):]
		if key == "repaired" {
			continue
		}
		n, err := strconv.Atoi(string(kv.Value))
		if err != nil {
			t.Fatalf("%s = %q: not a number", kv.Key, kv.Value)
		}
		out[key] = n
	}
	return out
}

// createBy is create with its target's client set.
func createBy(name, client string) *engine.Change {
	c := create(name)
	c.Target.Status.Client = client
	return c
}

// removal is the removal of c's target, as the engine makes it (the
// target at its removal, with its client).
func removal(c *engine.Change) *engine.Change {
	d := storetest.Delete(c.Name, at(9))
	d.Target, d.Event.Target = c.Target, c.Target
	return d
}

// TestCountsFollowCommits: every Commit that creates or removes targets
// counts them in its transaction, in total and per client; a create and
// a removal of one name in one transaction count nothing, a client left
// without targets leaves no key, and a refused transaction counts
// nothing.
func TestCountsFollowCommits(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	a1, a2, b1, anon := createBy("a1", "alice"), createBy("a2", "alice"), createBy("b1", "bob"), create("anon")
	commit(t, s, a1, a2, b1, anon)
	want := map[string]int{"total": 4, "clients/alice": 2, "clients/bob": 1}
	if got := counts(t, cli); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after 4 creates: counts %v, want %v", got, want)
	}
	c := createBy("c1", "carol")
	commit(t, s, removal(b1), c, removal(c))
	want = map[string]int{"total": 3, "clients/alice": 2}
	if got := counts(t, cli); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after bob's removal and carol's create and removal: counts %v, want %v", got, want)
	}
	err := s.Commit(t.Context(), []*engine.Change{createBy("a1", "alice"), createBy("a3", "alice")})
	if reasons := refusals(t, err); !errors.Is(reasons["a1"], engine.ErrAlreadyExists) {
		t.Fatalf("a create of a1 again: %v, want AlreadyExists", reasons)
	}
	if got := counts(t, cli); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a refused transaction: counts %v, want %v", got, want)
	}
}

// TestCountsAcrossStores: two stores (replicas) counting the same
// client's targets each find the other's counts in their compare, so
// neither overwrites the other's, and the limit holds against both.
func TestCountsAcrossStores(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	b := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	for _, s := range []*etcd.Store{a, b} {
		s.EnforceLimits(0, 3)
	}
	commit(t, a, createBy("x1", "alice"))
	commit(t, b, createBy("x2", "alice")) // b's first compare (absent) fails: it reads a's count
	commit(t, a, createBy("x3", "alice"))
	reasons := refusals(t, b.Commit(t.Context(), []*engine.Change{createBy("x4", "alice"), createBy("y1", "bob")}))
	if len(reasons) != 1 || !errors.Is(reasons["x4"], engine.ErrResourceExhausted) {
		t.Fatalf("a fourth create of alice's: refused %v, want x4 only, ResourceExhausted", reasons)
	}
	commit(t, b, createBy("y1", "bob"))
	if got, want := counts(t, c.Client(t)), map[string]int{"total": 4, "clients/alice": 3, "clients/bob": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}

// TestDeletesFreeRoomAcrossReplicas: a client at its limit deletes
// targets through the replica that owns them; creates on another replica
// then succeed, as many as were deleted.
func TestDeletesFreeRoomAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	limit := func(o *engine.Options) { o.MaxTargetsPerClient = 4 }
	_, optsA := member(t, c.Client(t), "", 1, "a", 0) // a owns the one shard
	_, optsB := member(t, c.Client(t), "", 1, "b")
	a := startReplica(t, open(t, c.Client(t), optsA), limit)
	b := startReplica(t, open(t, c.Client(t), optsB), limit)
	ctx := engine.WithClient(t.Context(), "alice")
	for i := range 4 {
		if _, err := a.eng.Create(ctx, &target.Spec{Name: fmt.Sprintf("t-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.eng.Create(ctx, &target.Spec{Name: "over"}); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Fatalf("a fifth create: %v, want ResourceExhausted", err)
	}
	for i := range 2 {
		if _, err := a.eng.Delete(ctx, fmt.Sprintf("t-%d", i)); err != nil {
			t.Fatal(err)
		}
		a.next(engine.KindDeleted, 100*time.Millisecond)
	}
	if err := b.eng.Sync(ctx, a.eng.Revision()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := b.eng.Create(ctx, &target.Spec{Name: fmt.Sprintf("again-%d", i)}); err != nil {
			t.Fatalf("create %d after 2 deletes: %v", i, err)
		}
	}
	if _, err := b.eng.Create(ctx, &target.Spec{Name: "over"}); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Errorf("a third create after 2 deletes: %v, want ResourceExhausted", err)
	}
}

// TestLoadRepairsCounts: counts that differ from the targets stored (a
// probed that does not count wrote some; an operator edited one) are
// corrected by Load, by what they lacked at its revision; two stores
// loading at once correct them once.
func TestLoadRepairsCounts(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	old := open(t, c.Client(t), etcd.Options{ReplicaID: "old"})
	etcd.CountNothing(old)
	counting := open(t, c.Client(t), etcd.Options{ReplicaID: "new"})
	commit(t, counting, createBy("n1", "alice"))
	commit(t, old, createBy("o1", "alice"), createBy("o2", "bob"), create("o3"))
	if _, err := cli.Put(t.Context(), "/probed/usage/clients/mallory", "7"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"total": 4, "clients/alice": 2, "clients/bob": 1}
	if got := counts(t, cli); fmt.Sprint(got) == fmt.Sprint(want) {
		t.Fatalf("counts %v before any Load: the drift is missing", got)
	}
	var wg sync.WaitGroup
	for i := range 2 {
		s := open(t, c.Client(t), etcd.Options{ReplicaID: "loader-" + strconv.Itoa(i)})
		wg.Go(func() { load(t, s) })
	}
	wg.Wait()
	if got := counts(t, cli); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after two Loads at once: counts %v, want %v", got, want)
	}
	// What was counted after the Load's revision stays counted.
	commit(t, counting, createBy("n2", "alice"))
	load(t, counting)
	want["total"], want["clients/alice"] = 5, 3
	if got := counts(t, cli); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after one more create and a Load: counts %v, want %v", got, want)
	}
}

// TestFencedChangesSurviveAMovedCount: a transaction refused because a
// count moved (another replica counted meanwhile), or because a create
// of it found its target, refuses no fenced change of it: the fence is
// read whole (a keys-only read leaves the lease out, and every fence
// looked moved: the changes were dropped as ownership lost).
func TestFencedChangesSurviveAMovedCount(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	_, opts := member(t, cli, "", 1, "a", 0) // a owns the one shard
	a := open(t, c.Client(t), opts)
	load(t, a) // the store reads its ownership
	b := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	web := createBy("web", "alice")
	commit(t, a, web)
	commit(t, b, createBy("other", "alice")) // the counts move under a
	tr := transition(web, 1)
	commit(t, a, tr, createBy("more", "alice"))
	if tr.Event.Revision == 0 {
		t.Fatal("the transition has no revision")
	}
	err := a.Commit(t.Context(), []*engine.Change{transition(tr, 2), createBy("other", "alice")})
	reasons := refusals(t, err)
	if len(reasons) != 1 || !errors.Is(reasons["other"], engine.ErrAlreadyExists) {
		t.Errorf("a batch with a create of an existing target: refused %v, want only the create (AlreadyExists)", reasons)
	}
}
