package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/storetest"
)

// applied is the revision of each event of the harness's watch pending
// now, by kind and name.
func applied(h *harness) map[engine.EventKind]map[string]uint64 {
	h.t.Helper()
	h.flush()
	out := make(map[engine.EventKind]map[string]uint64)
	for {
		select {
		case ev := <-h.events:
			if out[ev.Kind] == nil {
				out[ev.Kind] = make(map[string]uint64)
			}
			out[ev.Kind][ev.Name] = ev.Revision
		default:
			return out
		}
	}
}

// TestApplyPrunesAfterEveryUpdate: over a shared store an apply's update
// of a target another replica probes goes to that replica (Forward); the
// targets the list leaves out are pruned only after every update of the
// list is written, the forwarded ones included, and not at all while one
// could not be (its shard changing hands): an interrupted or resumed
// apply must never prune before the whole desired list is present.
func TestApplyPrunesAfterEveryUpdate(t *testing.T) {
	a, b, shared := replicas(t)
	ctx := context.Background()
	set := func(v string, names ...string) engine.ApplySet {
		s := engine.ApplySet{Owner: "ns/set", Selector: map[string]string{"set": "x"}, Forward: storetest.Forwarder{To: b.eng}}
		for _, n := range names {
			s.Targets = append(s.Targets, &target.Spec{Name: n, Labels: map[string]string{"set": "x", "v": v}})
		}
		return s
	}
	if _, err := a.eng.Apply(ctx, set("1", "a-keep", "a-gone", "a-gone2", "b-upd")); err != nil {
		t.Fatal(err)
	}
	applied(a)

	// b-upd's shard has no owner that runs (changing hands): its update
	// cannot be written, so nothing is pruned.
	assign(t, shared, "c", []int{1}, a, b)
	res, err := a.eng.Apply(ctx, set("2", "a-keep", "b-upd"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 0 || !slices.ContainsFunc(res.Conflicts, func(c engine.ApplyConflict) bool { return c.Name == "b-upd" }) {
		t.Errorf("with b-upd's update not written: deleted %v, conflicts %v; want none deleted, b-upd a conflict", res.Deleted, res.Conflicts)
	}
	if ev := applied(a); len(ev[engine.KindTerminating]) > 0 {
		t.Errorf("pruned %v while an update of the list was not written", ev[engine.KindTerminating])
	}
	for _, n := range []string{"a-gone", "a-gone2"} {
		if tg := a.get(n); tg.Status.Phase != engine.Active {
			t.Errorf("%s is %v, want active: pruned before the list was whole", n, tg.Status.Phase)
		}
	}

	// The shard back with b: the update is forwarded and written, then
	// the prunes.
	assign(t, shared, "b", []int{1}, a, b)
	res, err = a.eng.Apply(ctx, set("2", "a-keep", "b-upd"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Deleted, []string{"a-gone", "a-gone2"}) || len(res.Conflicts) != 0 {
		t.Errorf("deleted %v, conflicts %v; want a-gone and a-gone2 deleted, no conflict", res.Deleted, res.Conflicts)
	}
	ev := applied(a)
	updated := ev[engine.KindUpdated]["b-upd"]
	if updated == 0 {
		t.Fatalf("no update of b-upd: %v", ev)
	}
	for name, rev := range ev[engine.KindTerminating] {
		if rev < updated {
			t.Errorf("%s began terminating at revision %d, before the forwarded update of b-upd at %d", name, rev, updated)
		}
	}
	if got := len(ev[engine.KindTerminating]); got != 2 {
		t.Errorf("%d targets began terminating, want 2", got)
	}
}
