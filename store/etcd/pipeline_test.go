package etcd_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/etcd"
)

// TestPipelinedCommitsKeepTargetOrder: an engine over etcd writes a batch
// while another is in flight (Options.CommitsInFlight), and etcd may
// apply them in either order; a change of a target whose earlier change
// is in flight waits for it. An update of a is held at the gate; a second
// update of a is queued; an update of b then goes to etcd beside the
// held one (so with one commit in flight at a time the test fails: b's
// transaction never arrives), and the second update of a only once the
// first is applied, so a's events are in the order its updates were made
// although etcd applied b's first (without the wait, the second update
// of a overtakes the first).
func TestPipelinedCommitsKeepTargetOrder(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	kv := newGatedKV(cli.KV)
	cli.KV = kv
	s := open(t, cli, etcd.Options{ReplicaID: "a", RequestTimeout: -1})
	r := startReplica(t, s)
	t.Cleanup(kv.open) // before the replica stops
	ctx := t.Context()
	spec := func(name, v string) *target.Spec {
		return &target.Spec{Name: name, Labels: map[string]string{"v": v}}
	}
	for _, name := range []string{"a", "b"} {
		if _, err := r.eng.Create(ctx, spec(name, "0")); err != nil {
			t.Fatal(err)
		}
	}
	kv.closed.Store(true)
	updated := make(chan string, 3)
	update := func(name, v string) {
		go func() {
			_, err := r.eng.Update(ctx, spec(name, v))
			if err != nil {
				t.Errorf("Update %s to %s: %v", name, v, err)
			}
			updated <- name + "=" + v
		}()
	}
	update("a", "1")
	a1 := kv.next(t)
	if !a1.writes("a") {
		t.Fatal("the first transaction does not write a")
	}
	update("a", "2")
	poll.UntilBlocked(t, "engine.(*Engine).Update", 2) // a=2 is queued
	// A full batch besides a=2: b=1 (2 operations) and 41 creates (3
	// each: the count of their client's targets).
	n, _ := s.BatchLimits()
	var created sync.WaitGroup
	for i := range (n - 2) / 3 {
		created.Go(func() {
			if _, err := r.eng.Create(ctx, spec(fmt.Sprintf("c-%02d", i), "0")); err != nil {
				t.Error(err)
			}
		})
	}
	update("b", "1")
	b1 := kv.next(t)
	if !b1.writes("b") || b1.writes("a") {
		t.Fatalf("the second transaction in flight writes a (%t) or not b (%t): want b's and the creates'", b1.writes("a"), !b1.writes("b"))
	}
	b1.through()
	if got := <-updated; got != "b=1" {
		t.Fatalf("%s done first, want b=1", got)
	}
	created.Wait()
	a1.through()
	a2 := kv.next(t)
	if !a2.writes("a") {
		t.Fatal("the third transaction does not write a")
	}
	a2.through()
	<-updated
	<-updated
	kv.open()

	var order []string
	for len(order) < 3 {
		ev := r.next(engine.KindUpdated, 0)
		order = append(order, fmt.Sprintf("%s=%s", ev.Name, ev.Labels["v"]))
	}
	if want := "b=1 a=1 a=2"; strings.Join(order, " ") != want {
		t.Errorf("updates published %v, want %s", order, want)
	}
	got, err := r.eng.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Labels["v"] != "2" {
		t.Errorf("a has v=%s, want 2", got.Spec.Labels["v"])
	}
	st := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "reader"}))
	for _, tg := range st.Targets {
		if tg.Spec.Name == "a" && tg.Spec.Labels["v"] != "2" {
			t.Errorf("etcd holds a with v=%s, want 2", tg.Spec.Labels["v"])
		}
	}
}
