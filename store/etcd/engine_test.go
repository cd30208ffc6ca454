package etcd_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// replica is an engine over an etcd store, on a fake clock, with a watcher
// of every event.
type replica struct {
	t      *testing.T
	clock  *clockwork.FakeClock
	eng    *engine.Engine
	events chan engine.Event
}

// startReplica runs an engine over s (which owns what its options and the
// keys in etcd say), with the options set changes.
func startReplica(t *testing.T, s *etcd.Store, set ...func(*engine.Options)) *replica {
	t.Helper()
	r := &replica{t: t, clock: clockwork.NewFakeClock(), events: make(chan engine.Event, 1024)}
	ctx, cancel := context.WithCancel(context.Background())
	opts := engine.Options{
		Clock: r.clock, Store: s, Checkers: check.New(check.Options{}), Shards: 1,
	}
	for _, f := range set {
		f(&opts)
	}
	eng, err := engine.Open(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("engine.Open: %v", err)
	}
	r.eng = eng
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	w, err := eng.Watch(ctx, engine.WatchOptions{Since: eng.Revision() + 1})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		defer w.Close()
		for {
			b, err := w.Next(ctx)
			if err != nil {
				return
			}
			for _, ev := range b.Events {
				r.events <- ev
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s")
		}
		<-watching
	})
	return r
}

// next returns the next event of kind, moving the clock on by step while
// it waits (0: not at all).
func (r *replica) next(kind engine.EventKind, step time.Duration) engine.Event {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-r.events:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			r.t.Fatalf("no %s event within 20s", kind)
		case <-time.After(10 * time.Millisecond):
			if step > 0 {
				r.clock.Advance(step)
			}
		}
	}
}

// TestEnginesOverEtcd: two engines, replicas over one etcd: a target
// created on the replica that does not own its shard is probed by its
// owner only;
// the owner's transitions reach the other's watchers with the same
// revisions, and both serve the same target; the store decides that a
// name exists.
func TestEnginesOverEtcd(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	// One shard, a's.
	_, optsA := member(t, c.Client(t), "", 1, "a", 0)
	_, optsB := member(t, c.Client(t), "", 1, "b")
	a := startReplica(t, open(t, c.Client(t), optsA))
	b := startReplica(t, open(t, c.Client(t), optsB))

	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	ms := int32(100)
	spec := &target.Spec{Name: "a-web", ReadinessProbe: &probe.Spec{
		Handler:            probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: int32(p), Path: "/healthz"}},
		PeriodMilliseconds: &ms, FailureThreshold: 1,
	}}
	ctx := t.Context()
	if _, err := b.eng.Create(ctx, spec); err != nil {
		t.Fatalf("Create on the replica that does not own it: %v", err)
	}
	for _, r := range []*replica{a, b} {
		if _, err := r.eng.Create(ctx, &target.Spec{Name: "a-web"}); !errors.Is(err, engine.ErrAlreadyExists) {
			t.Errorf("second Create = %v, want ErrAlreadyExists", err)
		}
	}
	createdA, createdB := a.next(engine.KindCreated, 0), b.next(engine.KindCreated, 0)
	if createdA.Revision != createdB.Revision {
		t.Errorf("CREATED at %d on a, %d on b", createdA.Revision, createdB.Revision)
	}
	upA := a.next(engine.KindTransition, 50*time.Millisecond) // the owner probes on its clock
	upB := b.next(engine.KindTransition, 0)
	if upA.To != probe.Success || upA.Revision != upB.Revision || upB.To != probe.Success {
		t.Errorf("first transition: a %s at %d, b %s at %d; want success at one revision", upA.To, upA.Revision, upB.To, upB.Revision)
	}

	status.Store(http.StatusInternalServerError)
	downA := a.next(engine.KindTransition, 50*time.Millisecond) // the owner's clock drives its probes
	downB := b.next(engine.KindTransition, 0)
	if downA.To != probe.Failure || downA.Revision != downB.Revision {
		t.Errorf("second transition: a %s at %d, b %s at %d; want failure at one revision", downA.To, downA.Revision, downB.To, downB.Revision)
	}
	if got := a.eng.Stats().Wheel.Scheduled; got != 1 {
		t.Errorf("owner: %d probes scheduled, want 1", got)
	}
	if got := b.eng.Stats().Wheel.Scheduled; got != 0 {
		t.Errorf("other replica: %d probes scheduled, want 0", got)
	}
	ga, err := a.eng.Get(ctx, "a-web")
	if err != nil {
		t.Fatal(err)
	}
	gb, err := b.eng.Get(ctx, "a-web")
	if err != nil {
		t.Fatal(err)
	}
	if ga.Status.Revision != gb.Status.Revision || gb.Status.Revision != downB.Revision || gb.Status.Ready() {
		t.Errorf("Get: a at %d, b at %d (ready %t); want both at %d, not ready", ga.Status.Revision, gb.Status.Revision, gb.Status.Ready(), downB.Revision)
	}
}

// TestRacingCreatesOfOneName: creates of one name race on one replica
// over etcd (repeatedly, so that some share a transaction): exactly one
// succeeds, the other is AlreadyExists, and etcd holds the winner's.
func TestRacingCreatesOfOneName(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	r := startReplica(t, s)
	ctx := t.Context()
	for i := range 20 {
		name := "race-" + strconv.Itoa(i)
		storetest.RacingCreates(t, name, storetest.Creator(ctx, r.eng))
	}
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 20 {
		t.Fatalf("etcd holds %d targets, want 20", len(st.Targets))
	}
	for _, tg := range st.Targets {
		got, err := r.eng.Get(ctx, tg.Spec.Name)
		if err != nil || got.Spec.Labels["by"] != tg.Spec.Labels["by"] {
			t.Errorf("%s: engine has %+v (%v), etcd %v", tg.Spec.Name, got, err, tg.Spec.Labels)
		}
	}
}
