package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// createsTargets reports whether t writes a target's spec.
func (t *gatedTxn) createsTargets() bool {
	return slices.ContainsFunc(t.thenOps, func(op clientv3.Op) bool {
		return op.IsPut() && strings.Contains(string(op.KeyBytes()), "/specs/")
	})
}

// interruptedApply is the state TestInterruptedApplyResumed starts from:
// replica a's apply of ns/set (100 targets, then a list of 200 that
// keeps 50 of them) lost its lease after its list was recorded and
// before its first create; b sees the first list's 100 and the apply
// interrupted.
type interruptedApply struct {
	a, b  *replica
	ctx   context.Context // alice's, the caller of the apply
	set   func(from, to int) engine.ApplySet
	names func(e *engine.Engine) []string // the active targets, sorted
}

func newInterruptedApply(t *testing.T) *interruptedApply {
	c := etcdtest.Start(t)
	cliA := c.Client(t)
	kv := newGatedKV(cliA.KV)
	cliA.KV = kv
	grant := func(cli *clientv3.Client) clientv3.LeaseID {
		g, err := cli.Grant(t.Context(), 60)
		if err != nil {
			t.Fatal(err)
		}
		return g.ID
	}
	leaseA, leaseB := grant(cliA), grant(c.Client(t))
	// Both own every target (no Shards: nothing fenced), as a and b each
	// probing what they apply.
	a := startReplica(t, open(t, cliA, etcd.Options{ReplicaID: "a", RequestTimeout: -1, Lease: func() clientv3.LeaseID { return leaseA }}))
	t.Cleanup(kv.open) // before the replica stops
	b := startReplica(t, open(t, c.Client(t), etcd.Options{ReplicaID: "b", Lease: func() clientv3.LeaseID { return leaseB }}))
	ctx := engine.WithClient(t.Context(), "alice")
	set := func(from, to int) engine.ApplySet {
		s := engine.ApplySet{Owner: "ns/set", Selector: map[string]string{"set": "x"}}
		for i := from; i < to; i++ {
			s.Targets = append(s.Targets, &target.Spec{Name: fmt.Sprintf("ns/t-%04d", i), Labels: map[string]string{"set": "x"}})
		}
		return s
	}
	if res, err := a.eng.Apply(ctx, set(0, 100)); err != nil || len(res.Created) != 100 {
		t.Fatalf("the first apply: %+v, %v; want 100 created", res, err)
	}

	kv.closed.Store(true)
	applied := make(chan error, 1)
	go func() {
		_, err := a.eng.Apply(ctx, set(50, 250)) // 150 creates, 50 prunes
		applied <- err
	}()
	for {
		txn := kv.next(t)
		if txn.createsTargets() {
			if _, err := c.Client(t).Revoke(t.Context(), leaseA); err != nil {
				t.Fatal(err)
			}
			kv.open()
			break
		}
		txn.through()
	}
	if err := <-applied; !errors.Is(err, engine.ErrAborted) {
		t.Fatalf("the apply whose lease ended: %v, want Aborted", err)
	}
	names := func(e *engine.Engine) []string {
		t.Helper()
		all, _, err := e.List(ctx, engine.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tg := range all {
			if tg.Status.Phase == engine.Active {
				out = append(out, tg.Spec.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if err := b.eng.Sync(ctx, a.eng.Revision()); err != nil {
		t.Fatal(err)
	}
	if got := len(names(b.eng)); got != 100 {
		t.Fatalf("%d active targets after the interrupted apply, want the first list's 100 (nothing of the second written)", got)
	}
	owners, err := b.eng.InterruptedApplies(ctx)
	if err != nil || !slices.Equal(owners, []string{"ns/set"}) {
		t.Fatalf("InterruptedApplies = %v, %v; want [ns/set]", owners, err)
	}
	return &interruptedApply{a: a, b: b, ctx: ctx, set: set, names: names}
}

// TestInterruptedApplyResumed: an Apply over etcd loses its replica's
// lease after its list was recorded and before its first create (the
// lease revoked while the create's transaction is held): its creates are
// refused (Aborted) and its record stays. Another replica finds it
// interrupted and resumes it: the set ends exactly the new list, the
// targets the list leaves out pruned, and the record is gone. Without
// the record (no journal) nothing would finish it.
func TestInterruptedApplyResumed(t *testing.T) {
	t.Parallel()
	in := newInterruptedApply(t)
	ctx, b, set, names := in.ctx, in.b, in.set, in.names
	res, err := b.eng.ResumeApply(t.Context(), "ns/set", nil)
	if err != nil || res == nil {
		t.Fatalf("ResumeApply = %v, %v", res, err)
	}
	if len(res.Created) != 150 || len(res.Deleted) != 50 {
		t.Errorf("resumed: %d created, %d deleted; want 150, 50", len(res.Created), len(res.Deleted))
	}
	want := make([]string, 0, 200)
	for _, s := range set(50, 250).Targets {
		want = append(want, s.Name)
	}
	if got := names(b.eng); !slices.Equal(got, want) {
		t.Errorf("after the resume: %d active targets, want the second list's %d", len(got), len(want))
	}
	tg, err := b.eng.Get(ctx, "ns/t-0200")
	if err != nil || tg.Status.Client != "alice" || tg.Status.Owner != "ns/set" {
		t.Errorf("a target the resume created: %+v, %v; want client alice, owner ns/set", tg, err)
	}
	if owners, _ := b.eng.InterruptedApplies(ctx); len(owners) != 0 {
		t.Errorf("InterruptedApplies after the resume = %v, want none", owners)
	}
}

// TestRefusedResumeEndsTheApply: a resume whose preparation refuses the
// set (its caller may no longer write one of its targets) writes nothing
// and ends the apply: the set stays as the interrupted apply left it,
// and the apply is no longer interrupted (no replica retries it).
func TestRefusedResumeEndsTheApply(t *testing.T) {
	t.Parallel()
	in := newInterruptedApply(t)
	refusal := errors.New("alice may no longer write ns/t-0200")
	var client string
	res, err := in.b.eng.ResumeApply(t.Context(), "ns/set", func(_ *engine.ApplySet, c string) error {
		client = c
		return refusal
	})
	if !errors.Is(err, refusal) || res != nil || client != "alice" {
		t.Fatalf("ResumeApply = %+v, %v (prepared for %q); want the refusal, for alice", res, err, client)
	}
	if got := len(in.names(in.b.eng)); got != 100 {
		t.Errorf("%d active targets after the refused resume, want the first list's 100", got)
	}
	if owners, err := in.b.eng.InterruptedApplies(in.ctx); err != nil || len(owners) != 0 {
		t.Errorf("InterruptedApplies after the refused resume = %v, %v; want none", owners, err)
	}
}

// TestApplyPrunesOnceTheListIsWhole: an apply over etcd whose update of
// another replica's target cannot be written (the target's shard has no
// owner: it changes hands, as after a replica's death) prunes nothing —
// the targets the list leaves out stay active — and stays recorded; once
// the shard has an owner again, the resumed apply writes the update and
// only then prunes, and ends. Before, the prunes went ahead and the
// update came with a later resume: a target left out terminated before
// the last write of the desired list (TestClusterApplyCrash).
func TestApplyPrunesOnceTheListIsWhole(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	const shards = 8
	keys := keyspace.New("", shards)
	names, owned := distinctShards("t-", 3, shards)
	keep, gone, upd := names[0], names[1], names[2]
	leaseA, optsA := member(t, cli, "", shards, "a", owned[0], owned[1])
	leaseB, optsB := member(t, cli, "", shards, "b", owned[2])
	optsA.Lease = func() clientv3.LeaseID { return leaseA }
	optsB.Lease = func() clientv3.LeaseID { return leaseB }
	a := startReplica(t, open(t, c.Client(t), optsA))
	b := startReplica(t, open(t, c.Client(t), optsB))
	ctx := engine.WithClient(t.Context(), "alice")
	set := func(v string, names ...string) engine.ApplySet {
		s := engine.ApplySet{Owner: "ns/set", Selector: map[string]string{"set": "x"}, Forward: storetest.Forwarder{To: b.eng}}
		for _, n := range names {
			s.Targets = append(s.Targets, &target.Spec{Name: n, Labels: map[string]string{"set": "x", "v": v}})
		}
		return s
	}
	// synced waits until both engines have applied etcd revision rev.
	synced := func(rev int64) {
		t.Helper()
		for _, r := range []*replica{a, b} {
			if err := r.eng.Sync(ctx, keyspace.Position(rev)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res, err := a.eng.Apply(ctx, set("1", keep, gone, upd)); err != nil || len(res.Created) != 3 {
		t.Fatalf("the first apply: %+v, %v; want 3 created", res, err)
	}

	del, err := cli.Delete(t.Context(), keys.Shard(owned[2]))
	if err != nil {
		t.Fatal(err)
	}
	synced(del.Header.Revision)
	res, err := a.eng.Apply(ctx, set("2", keep, upd))
	if err != nil {
		t.Fatalf("the apply with the update not written: %v", err)
	}
	if len(res.Deleted) != 0 || !slices.ContainsFunc(res.Conflicts, func(c engine.ApplyConflict) bool { return c.Name == upd }) {
		t.Errorf("with %s's update not written: deleted %v, conflicts %v; want none deleted, %s a conflict", upd, res.Deleted, res.Conflicts, upd)
	}
	if tg, err := a.eng.Get(ctx, gone); err != nil || tg.Status.Phase != engine.Active {
		t.Fatalf("%s: %+v, %v; want active (pruned before the list was whole)", gone, tg, err)
	}
	if owners, err := a.eng.InterruptedApplies(ctx); err != nil || !slices.Equal(owners, []string{"ns/set"}) {
		t.Fatalf("InterruptedApplies = %v, %v; want [ns/set] (the apply left incomplete stays recorded)", owners, err)
	}

	put, err := cli.Put(t.Context(), keys.Shard(owned[2]), "b", clientv3.WithLease(leaseB))
	if err != nil {
		t.Fatal(err)
	}
	synced(put.Header.Revision)
	res, err = a.eng.ResumeApply(t.Context(), "ns/set", func(set *engine.ApplySet, _ string) error {
		set.Forward = storetest.Forwarder{To: b.eng}
		return nil
	})
	if err != nil || res == nil || !slices.Equal(res.Deleted, []string{gone}) || len(res.Conflicts) != 0 {
		t.Fatalf("ResumeApply = %+v, %v; want %s deleted, no conflict", res, err, gone)
	}
	var updated, terminating uint64
	deadline := time.After(20 * time.Second)
	for terminating == 0 {
		select {
		case ev := <-a.events:
			switch {
			case ev.Kind == engine.KindUpdated && ev.Name == upd && ev.Target.Spec.Labels["v"] == "2":
				updated = ev.Revision
			case ev.Kind == engine.KindTerminating:
				terminating = ev.Revision
				if ev.Name != gone {
					t.Errorf("%s began terminating, want only %s", ev.Name, gone)
				}
			}
		case <-deadline:
			t.Fatalf("no TERMINATING within 20s")
		}
	}
	if updated == 0 || terminating < updated {
		t.Errorf("%s began terminating at revision %d, the update of %s at %d: want the prune after it", gone, terminating, upd, updated)
	}
	if owners, _ := a.eng.InterruptedApplies(ctx); len(owners) != 0 {
		t.Errorf("InterruptedApplies after the resume = %v, want none", owners)
	}
}
