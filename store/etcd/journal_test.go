package etcd_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// journaled opens a store of replica id over c that keeps applies under
// a lease of its own (granted for 60s), on the real clock (its waits for
// a lock are real).
func journaled(t *testing.T, c *etcdtest.Cluster, id string) (*etcd.Store, clientv3.LeaseID, *clientv3.Client) {
	t.Helper()
	cli := c.Client(t)
	g, err := cli.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, cli, etcd.Options{ReplicaID: id, Clock: clockwork.NewRealClock(), Lease: func() clientv3.LeaseID { return g.ID }})
	return s, g.ID, cli
}

// record is the record of an apply of owner with n web targets.
func record(owner string, n int) *engine.ApplyRecord {
	rec := &engine.ApplyRecord{Owner: owner, Selector: map[string]string{"set": owner}, Client: "alice"}
	for i := range n {
		spec := storetest.WebSpec(fmt.Sprintf("%s/t-%05d", owner, i))
		spec.Labels = map[string]string{"set": owner}
		rec.Targets = append(rec.Targets, spec)
	}
	return rec
}

// keysUnder counts the keys under prefix.
func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) int {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// TestJournalKeepsAnApplyUntilItEnds: a recorded apply of 5,000 targets
// (several chunks) is begun, not taken over while its replica holds the
// lock, and gone with every key of it once ended.
func TestJournalKeepsAnApplyUntilItEnds(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, _, cli := journaled(t, c, "a")
	b, _, _ := journaled(t, c, "b")
	rec := record("ns-a", 5000)
	tk, err := a.BeginApply(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if chunks := keysUnder(t, cli, "/probed/targetsets/ns-a@chunks/"); chunks < 2 {
		t.Errorf("%d chunks for 5,000 targets, want several", chunks)
	}
	if begun, err := b.ApplyBegun(t.Context(), "ns-a"); err != nil || !begun {
		t.Errorf("ApplyBegun on another replica = %t, %v; want true", begun, err)
	}
	if owners, err := b.InterruptedApplies(t.Context()); err != nil || len(owners) != 0 {
		t.Errorf("InterruptedApplies while its replica holds it = %v, %v; want none", owners, err)
	}
	if _, _, ok, err := b.TakeOverApply(t.Context(), "ns-a"); ok || err != nil {
		t.Errorf("TakeOverApply while its replica holds it: ok %t, %v; want false", ok, err)
	}
	if err := a.EndApply(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	if n := keysUnder(t, cli, "/probed/targetsets/"); n != 0 {
		t.Errorf("%d keys left under P/targetsets/ after EndApply, want none", n)
	}
	if begun, _ := b.ApplyBegun(t.Context(), "ns-a"); begun {
		t.Error("ApplyBegun after EndApply = true")
	}
}

// TestJournalTakeOverAfterTheLeaseEnds: the replica that began an apply
// loses its lease (as when it dies); another finds the apply
// interrupted, takes it over and reads the very record; the first
// replica's creates under its old hold are refused (Aborted) and its
// EndApply leaves the new holder's apply alone.
func TestJournalTakeOverAfterTheLeaseEnds(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, leaseA, cliA := journaled(t, c, "a")
	b, _, cli := journaled(t, c, "b")
	rec := record("ns/set", 3000)
	old, err := a.BeginApply(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cliA.Revoke(t.Context(), leaseA); err != nil {
		t.Fatal(err)
	}
	owners, err := b.InterruptedApplies(t.Context())
	if err != nil || !reflect.DeepEqual(owners, []string{"ns/set"}) {
		t.Fatalf("InterruptedApplies = %v, %v; want [ns/set]", owners, err)
	}
	got, tk, ok, err := b.TakeOverApply(t.Context(), "ns/set")
	if err != nil || !ok {
		t.Fatalf("TakeOverApply = ok %t, %v", ok, err)
	}
	if got.Owner != rec.Owner || got.Client != rec.Client || !reflect.DeepEqual(got.Selector, rec.Selector) || len(got.Targets) != len(rec.Targets) {
		t.Fatalf("took over %q of %q, %v, %d targets; want the record", got.Owner, got.Client, got.Selector, len(got.Targets))
	}
	for i := range got.Targets {
		if !reflect.DeepEqual(got.Targets[i], rec.Targets[i]) {
			t.Fatalf("target %d: %+v, want %+v", i, got.Targets[i], rec.Targets[i])
		}
	}
	if _, _, ok, _ := a.TakeOverApply(t.Context(), "ns/set"); ok {
		t.Error("a second TakeOverApply succeeded")
	}
	late := create("ns/set/late")
	late.Apply = &old
	if reasons := refusals(t, a.Commit(t.Context(), []*engine.Change{late})); !errors.Is(reasons[late.Name], engine.ErrAborted) {
		t.Errorf("a create under the lost hold: %v, want Aborted", reasons)
	}
	ours := create("ns/set/ours")
	ours.Apply = &tk
	commit(t, b, ours)
	if err := a.EndApply(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if begun, _ := b.ApplyBegun(t.Context(), "ns/set"); !begun {
		t.Error("the old holder's EndApply removed the new holder's apply")
	}
	if err := b.EndApply(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	if n := keysUnder(t, cli, "/probed/targetsets/"); n != 0 {
		t.Errorf("%d keys left under P/targetsets/, want none", n)
	}
}

// TestBeginApplyWaitsForTheLock: a second apply of a set waits while
// another live replica applies it, and takes over its record once that
// one ends; an apply of another set does not wait.
func TestBeginApplyWaitsForTheLock(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, _, _ := journaled(t, c, "a")
	b, _, _ := journaled(t, c, "b")
	first, err := a.BeginApply(t.Context(), record("x", 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.BeginApply(t.Context(), record("y", 10)); err != nil {
		t.Fatalf("an apply of another set: %v", err)
	}
	began := make(chan error, 1)
	go func() {
		_, err := b.BeginApply(t.Context(), record("x", 20))
		began <- err
	}()
	// How long the second apply waits is the first's to decide: 500 ms
	// of a loaded machine are plenty for a BeginApply that does not wait.
	select {
	case err := <-began:
		t.Fatalf("the second apply of x began (%v) while the first holds its lock", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := a.EndApply(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if err := <-began; err != nil {
		t.Fatalf("the second apply of x, once the first ended: %v", err)
	}
}

// TestOrphanChunksDropped: chunks no record names and no lock guards (an
// apply that died while recording them) are dropped by
// InterruptedApplies.
func TestOrphanChunksDropped(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b, _, cli := journaled(t, c, "b")
	if _, err := cli.Put(t.Context(), "/probed/targetsets/ns/x@chunks/0123456789abcdef/000000", "\x01"); err != nil {
		t.Fatal(err)
	}
	if owners, err := b.InterruptedApplies(t.Context()); err != nil || len(owners) != 0 {
		t.Fatalf("InterruptedApplies = %v, %v; want none", owners, err)
	}
	if n := keysUnder(t, cli, "/probed/targetsets/"); n != 0 {
		t.Errorf("%d orphan chunks left, want none", n)
	}
}
