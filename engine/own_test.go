package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

func TestRestartKeepsHasInitializedAndReadiness(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	live := b.probe(1, -900)
	live.FailureThreshold = 2
	live.InitializationFailureThreshold = ptr[int32](50)
	h.create(&target.Spec{Name: "app", LivenessProbe: live, ReadinessProbe: b.probe(1, -900)})
	h.nextAll(engine.KindInitialized, engine.KindTransition) // liveness, readiness: either first
	before := h.get("app")
	if !before.Status.Ready() || !before.Status.Probes[probe.Liveness].HasInitialized {
		t.Fatalf("before restart: %+v", before.Status)
	}
	lastRev := h.eng.Revision()

	b.set(503)
	h.restart()
	after := h.get("app")
	if !after.Status.Ready() || !after.Status.Probes[probe.Liveness].HasInitialized || after.Status.Probes[probe.Readiness].Result != probe.Success {
		t.Fatalf("after restart: %+v; want still ready, liveness initialized (no flap to not-ready)", after.Status)
	}
	if after.Status.Revision != before.Status.Revision {
		t.Errorf("revision of the target changed across the restart: %d → %d", before.Status.Revision, after.Status.Revision)
	}
	// failureThreshold (2), not initializationFailureThreshold (50), applies.
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	var sawLiveness bool
	for !sawLiveness {
		ev := h.next(engine.KindTransition)
		if ev.Revision <= lastRev {
			t.Fatalf("revision %d reused after the restart (last before: %d)", ev.Revision, lastRev)
		}
		if ev.Probe == probe.Liveness {
			sawLiveness = true
			if ev.To != probe.Failure || ev.Consecutive != 2 {
				t.Fatalf("liveness transition = %+v, want failure after 2 failures", ev)
			}
		}
	}
}

func TestRestartSpreadsProbes(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	const n = 50
	for i := range n {
		h.create(&target.Spec{Name: "t" + string(rune('a'+i/26)) + string(rune('a'+i%26)), LivenessProbe: b.probe(1, 0)})
	}
	h.advance(10*time.Millisecond, 10*time.Millisecond)
	h.restart()
	// Over one period every probe runs once, at distinct times spread over
	// the period rather than all at once.
	seen := make(map[time.Duration]int)
	start := h.clock.Now()
	for step := 0; step < 100; step++ {
		h.advance(10*time.Millisecond, 10*time.Millisecond)
	}
	ts, _, err := h.eng.List(context.Background(), engine.ListOptions{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range ts {
		ps := tg.Status.Probes[probe.Liveness]
		if ps.ProbesTotal != 1 {
			t.Fatalf("%s probed %d times in the first period after the restart, want 1", tg.Spec.Name, ps.ProbesTotal)
		}
		seen[ps.LastProbeTime.Sub(start).Truncate(100*time.Millisecond)]++
	}
	if len(seen) < 5 {
		t.Errorf("first probes after the restart fell into %d of 10 100ms buckets, want them spread: %v", len(seen), seen)
	}
}

func TestRestartResumesDrain(t *testing.T) {
	h := newHarness(t)
	h.create(&target.Spec{Name: "web", Lifecycle: sleepFor(10)})
	if _, err := h.eng.Delete(context.Background(), "web"); err != nil {
		t.Fatal(err)
	}
	h.advance(3*time.Second, time.Second)
	h.restart()
	if tg := h.get("web"); tg.Status.Phase != engine.Terminating {
		t.Fatalf("phase after restart = %v, want terminating", tg.Status.Phase)
	}
	h.advance(6999*time.Millisecond, time.Second/2)
	h.noEvent(engine.KindDeleted)
	h.advance(time.Millisecond, time.Millisecond)
	if ev := h.next(engine.KindDeleted); ev.Time.Sub(t0) != 10*time.Second {
		t.Errorf("deleted at %v, want 10s after the delete", ev.Time.Sub(t0))
	}
}

func TestRatchetingSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.create(&target.Spec{Name: "zero", Lifecycle: sleepFor(0)})
	h.opts.Gates = feature.Gates{}.With(feature.PodLifecycleSleepActionAllowZero, false)
	h.restart()
	if _, err := h.eng.Update(context.Background(), &target.Spec{Name: "zero", Labels: map[string]string{"a": "b"}, Lifecycle: sleepFor(0)}); err != nil {
		t.Fatalf("update keeping sleep 0 after restarting with the gate off: %v", err)
	}
	if _, err := h.eng.Create(context.Background(), &target.Spec{Name: "new", Lifecycle: sleepFor(0)}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("new target with sleep 0 and the gate off: %v, want ErrInvalid", err)
	}
}
