package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// TestOwnProbeDisownOwnAgain drives a target through a change of owner on
// the fake clock, as a replica losing and regaining it (or a new owner
// after a failover) would: after Disown returns no run starts; Own starts
// from what is published — ready stays ready, hasInitialized is kept (so
// failureThreshold, not initializationFailureThreshold, applies), the
// runs start at 0 — with no transition invented and the first probe
// within one period.
func TestOwnProbeDisownOwnAgain(t *testing.T) {
	h := newHarness(t)
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
	if err := h.eng.Disown(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	hits := b.hits.Load()
	h.advance(time.Second, 10*time.Millisecond)
	if got := b.hits.Load() - hits; got != 0 {
		t.Fatalf("%d runs after Disown returned, want none", got)
	}
	if st := h.eng.Stats(); st.Wheel.Scheduled != 0 || st.Inflight != 0 {
		t.Errorf("after Disown: %d probes scheduled, %d in flight; want none", st.Wheel.Scheduled, st.Inflight)
	}
	tg := h.get("web") // still known and reported
	if !tg.Status.Ready() || !tg.Status.Probes[probe.Readiness].HasInitialized {
		t.Fatalf("disowned target reported as %+v, want ready and initialized", tg.Status)
	}

	ownedAt := h.clock.Now()
	if err := h.eng.Own(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	h.quiesce()
	h.advance(100*time.Millisecond, time.Millisecond)
	if got := b.hits.Load() - hits; got != 1 {
		t.Fatalf("%d runs in the first period after Own, want 1 (spread over the period)", got)
	}
	ps := h.get("web").Status.Probes[probe.Readiness]
	if ps.ConsecutiveSuccesses != 1 || ps.ProbesTotal != 1 || ps.LastProbeTime.Before(ownedAt) {
		t.Errorf("after Own and one run: %d consecutive successes, %d probes, last at %v; want counters from 0 and a run after Own",
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

	// Own and Disown of unknown targets.
	if err := h.eng.Own(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Own(nope) = %v, want ErrNotFound", err)
	}
	if err := h.eng.Disown(ctx, "nope"); err != nil {
		t.Errorf("Disown(nope) = %v, want nil", err)
	}
}

// TestDisownWaitsForTheRunInProgress: Disown cancels a run in progress and
// returns only once it has ended; its outcome is not applied.
func TestDisownWaitsForTheRunInProgress(t *testing.T) {
	h, g := newGateHarness(t)
	h.create(&target.Spec{Name: "web", ReadinessProbe: tcpProbe("a", 1)})
	waitStarted(t, g, "web")
	if err := h.eng.Disown(context.Background(), "web"); err != nil {
		t.Fatal(err)
	}
	if st := h.eng.Stats(); st.Inflight != 0 {
		t.Errorf("Disown returned with %d runs in flight", st.Inflight)
	}
	if overlapping, closed := g.overlaps(); len(overlapping) > 0 || closed != 1 {
		t.Errorf("after Disown: overlapping %v, %d closed; want the checker closed once, after its run", overlapping, closed)
	}
	h.noEvent(engine.KindTransition)
	if ps := h.get("web").Status.Probes[probe.Readiness]; ps.ProbesTotal != 0 {
		t.Errorf("the cancelled run was applied: %d probes", ps.ProbesTotal)
	}
}

// TestDrainFinishedByTheNextOwner: a target deleted while owned by one
// engine, disowned mid-drain, is removed by the next owner when its
// preStop sleep ends (counted from its deletion), not by the one that let
// it go.
func TestDrainFinishedByTheNextOwner(t *testing.T) {
	h := newHarness(t)
	spec := &target.Spec{Name: "web", Lifecycle: &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 1}}}}
	h.create(spec)
	ctx := context.Background()
	if _, err := h.eng.Delete(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	h.next(engine.KindTerminating)
	h.advance(500*time.Millisecond, 50*time.Millisecond)
	if err := h.eng.Disown(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second, 50*time.Millisecond)
	h.noEvent(engine.KindDeleted)
	if tg := h.get("web"); tg.Status.Phase != engine.Terminating {
		t.Fatalf("phase %v, want terminating until an owner finishes the drain", tg.Status.Phase)
	}
	if err := h.eng.Own(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	ev := h.next(engine.KindDeleted)
	if got := ev.Time.Sub(t0); got != 1500*time.Millisecond {
		t.Errorf("DELETED at %v, want at once when owned again (1.5s; the sleep ended at 1s)", got)
	}
}
