package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/memory"
)

// overShared makes a harness run over replica id of shared (whose
// ownership Assign moves, in the log).
func overShared(shared *memory.Shared, id string) func(*engine.Options) {
	return func(o *engine.Options) { o.Store = shared.Replica(id) }
}

// owned starts a harness over a shared store of one shard, owned by its
// replica "a".
func owned(t *testing.T, mod ...func(*engine.Options)) (*harness, *memory.Shared) {
	shared := memory.NewShared(3, 1, nil)
	shared.Assign("a", 0)
	return newHarness(t, append([]func(*engine.Options){overShared(shared, "a")}, mod...)...), shared
}

// assign gives shards to replica id ("": to none) in shared's log, and
// waits until each of hs has applied it: its view has reached a later
// position (a delivery's ownership is applied once its view is at it).
func assign(t *testing.T, shared *memory.Shared, id string, shards []int, hs ...*harness) {
	t.Helper()
	shared.Assign(id, shards...)
	marker := shared.Assign("")
	for _, h := range hs {
		if err := h.eng.Sync(context.Background(), marker); err != nil {
			t.Fatal(err)
		}
		h.quiesce()
	}
}

// TestReleaseThenOwnAgain drives a target through a change of owner on
// the fake clock, as a replica releasing it and gaining it again (or a
// new owner after a failover) would: after Release returns no run
// starts; when the store's log brings the shard back, the engine starts
// from what is published — ready stays ready, hasInitialized is kept (so
// failureThreshold, not initializationFailureThreshold, applies), the
// runs start at 0 — with no transition invented and the first probe
// within one period.
func TestReleaseThenOwnAgain(t *testing.T) {
	h, shared := owned(t)
	b := h.newBackend(200)
	p := b.probe(1, -900) // 100ms
	p.FailureThreshold = 2
	p.InitializationFailureThreshold = ptr[int32](5)
	h.create(&target.Spec{Name: "web", ReadinessProbe: p})
	if ev := h.next(engine.KindTransition); ev.To != probe.Success || !ev.Initialized {
		t.Fatalf("first transition = %+v, want success that initializes", ev)
	}
	h.advance(300*time.Millisecond, 10*time.Millisecond)

	ctx := context.Background()
	if err := h.eng.Release(ctx, []int{0}); err != nil {
		t.Fatal(err)
	}
	hits := b.hits.Load()
	h.advance(time.Second, 10*time.Millisecond)
	if got := b.hits.Load() - hits; got != 0 {
		t.Fatalf("%d runs after Release returned, want none", got)
	}
	if st := h.eng.Stats(); st.Wheel.Scheduled != 0 || st.Inflight != 0 {
		t.Errorf("after Release: %d probes scheduled, %d in flight; want none", st.Wheel.Scheduled, st.Inflight)
	}
	tg := h.get("web") // still known and reported
	if !tg.Status.Ready() || !tg.Status.Probes[probe.Readiness].HasInitialized {
		t.Fatalf("released target reported as %+v, want ready and initialized", tg.Status)
	}

	// The shard leaves (its key deleted), then comes back (claimed again).
	assign(t, shared, "", []int{0}, h)
	h.advance(time.Second, 10*time.Millisecond)
	if got := b.hits.Load() - hits; got != 0 {
		t.Fatalf("%d runs of a shard the log shows nobody's, want none", got)
	}
	ownedAt := h.clock.Now()
	assign(t, shared, "a", []int{0}, h)
	h.advance(100*time.Millisecond, time.Millisecond)
	if got := b.hits.Load() - hits; got != 1 {
		t.Fatalf("%d runs in the first period after the claim, want 1 (spread over the period)", got)
	}
	ps := h.get("web").Status.Probes[probe.Readiness]
	if ps.ConsecutiveSuccesses != 1 || ps.ProbesTotal != 1 || ps.LastProbeTime.Before(ownedAt) {
		t.Errorf("after the claim and one run: %d consecutive successes, %d probes, last at %v; want counters from 0 and a run after the claim",
			ps.ConsecutiveSuccesses, ps.ProbesTotal, ps.LastProbeTime.Sub(t0))
	}
	h.noEvent(engine.KindTransition, engine.KindInitialized)

	// hasInitialized survived the change of owner: 2 failures flip it.
	b.set(503)
	h.advance(200*time.Millisecond, 10*time.Millisecond)
	ev := h.next(engine.KindTransition)
	if ev.From != probe.Success || ev.To != probe.Failure || ev.Consecutive != 2 {
		t.Fatalf("transition = %+v, want success→failure after failureThreshold (2) failures", ev)
	}
}

// TestReleasedShardTakesNoNewTarget: a target created in a shard being
// released is registered and reported, not probed, until the release
// ends: Keep (the release stalled and the replica keeps the shard) probes
// it from what is published.
func TestReleasedShardTakesNoNewTarget(t *testing.T) {
	h, _ := owned(t)
	b := h.newBackend(200)
	ctx := context.Background()
	if err := h.eng.Release(ctx, []int{0}); err != nil {
		t.Fatal(err)
	}
	h.create(&target.Spec{Name: "web", ReadinessProbe: b.probe(1, -900)})
	h.advance(time.Second, 10*time.Millisecond)
	if got := b.hits.Load(); got != 0 {
		t.Fatalf("%d runs of a target created in a released shard, want none", got)
	}
	if st := h.eng.Stats(); st.Targets != 1 || st.Wheel.Scheduled != 0 {
		t.Errorf("%d targets, %d probes scheduled; want the target reported and not probed", st.Targets, st.Wheel.Scheduled)
	}
	h.eng.Keep([]int{0})
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	if got := b.hits.Load(); got != 1 {
		t.Fatalf("%d runs in the first period after Keep, want 1", got)
	}
}

// TestReleaseWaitsForTheRunInProgress: Release cancels a run in progress
// and returns only once it has ended; its outcome is not applied.
func TestReleaseWaitsForTheRunInProgress(t *testing.T) {
	g := &gateCheckers{release: make(chan struct{}), started: make(chan string, 64)}
	g.hold.Store(true)
	h, _ := owned(t, func(o *engine.Options) { o.Checkers = g })
	g.h = h
	h.create(&target.Spec{Name: "web", ReadinessProbe: tcpProbe("a", 1)})
	waitStarted(t, g, "web")
	if err := h.eng.Release(context.Background(), []int{0}); err != nil {
		t.Fatal(err)
	}
	if st := h.eng.Stats(); st.Inflight != 0 {
		t.Errorf("Release returned with %d runs in flight", st.Inflight)
	}
	if overlapping, closed := g.overlaps(); len(overlapping) > 0 || closed != 1 {
		t.Errorf("after Release: overlapping %v, %d closed; want the checker closed once, after its run", overlapping, closed)
	}
	h.noEvent(engine.KindTransition)
	if ps := h.get("web").Status.Probes[probe.Readiness]; ps.ProbesTotal != 0 {
		t.Errorf("the cancelled run was applied: %d probes", ps.ProbesTotal)
	}
}

// TestDrainFinishedByTheNextOwner: a target deleted while owned by one
// engine, released mid-drain, is removed by the next owner when its
// preStop sleep ends (counted from its deletion), not by the one that let
// it go.
func TestDrainFinishedByTheNextOwner(t *testing.T) {
	h, shared := owned(t)
	spec := &target.Spec{Name: "web", Lifecycle: &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 1}}}}
	h.create(spec)
	ctx := context.Background()
	if _, err := h.eng.Delete(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	h.next(engine.KindTerminating)
	h.advance(500*time.Millisecond, 50*time.Millisecond)
	if err := h.eng.Release(ctx, []int{0}); err != nil {
		t.Fatal(err)
	}
	assign(t, shared, "", []int{0}, h)
	h.advance(time.Second, 50*time.Millisecond)
	h.noEvent(engine.KindDeleted)
	if tg := h.get("web"); tg.Status.Phase != engine.Terminating {
		t.Fatalf("phase %v, want terminating until an owner finishes the drain", tg.Status.Phase)
	}
	assign(t, shared, "a", []int{0}, h)
	ev := h.next(engine.KindDeleted)
	if got := ev.Time.Sub(t0); got != 1500*time.Millisecond {
		t.Errorf("DELETED at %v, want at once when owned again (1.5s; the sleep ended at 1s)", got)
	}
}
