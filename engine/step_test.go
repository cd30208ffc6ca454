package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/refused"
)

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	h := newHarness(t)
	startup := h.newBackend(503)
	app := h.newBackend(200)
	sp := startup.probe(1, -900)
	sp.FailureThreshold = 100
	h.create(&target.Spec{Name: "slow", StartupProbe: sp, ReadinessProbe: app.probe(1, -900), LivenessProbe: app.probe(1, -900)})
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	if hits := app.hits.Load(); hits != 0 {
		t.Fatalf("liveness/readiness probed %d times before startup succeeded", hits)
	}
	tg := h.get("slow")
	if tg.Status.Started() || tg.Status.Ready() {
		t.Fatalf("started %v ready %v before the startup probe passed", tg.Status.Started(), tg.Status.Ready())
	}
	startup.set(200)
	// The startup probe runs at 400ms and succeeds; readiness runs at once
	// (the same instant), not a period later.
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	ev := h.next(engine.KindTransition)
	if ev.Probe != probe.Startup || ev.To != probe.Success || ev.Time.Sub(t0) != 400*time.Millisecond {
		t.Fatalf("first transition = %+v, want startup success at 400ms", ev)
	}
	ev = h.next(engine.KindTransition)
	if ev.Probe != probe.Readiness || ev.To != probe.Success || !ev.Ready || ev.Time.Sub(t0) != 400*time.Millisecond {
		t.Fatalf("second transition = %+v, want readiness success (ready) at 400ms", ev)
	}
	startupHits := startup.hits.Load()
	h.advance(500*time.Millisecond, 10*time.Millisecond)
	if startup.hits.Load() != startupHits {
		t.Errorf("the startup probe kept running after it succeeded")
	}
}

func TestInitializationFailureThreshold(t *testing.T) {
	// Seed 003 through the engine: liveness with period 100ms,
	// initializationFailureThreshold 5, failureThreshold 2.
	h := newHarness(t)
	b := h.newBackend(503)
	p := b.probe(1, -900)
	p.FailureThreshold = 2
	p.InitializationFailureThreshold = ptr[int32](5)
	h.create(&target.Spec{Name: "app", LivenessProbe: p})
	h.advance(300*time.Millisecond, 10*time.Millisecond) // probes at 0..300: 4 failures
	h.noEvent(engine.KindTransition)
	h.advance(100*time.Millisecond, 10*time.Millisecond) // 5th failure
	ev := h.next(engine.KindTransition)
	if ev.Probe != probe.Liveness || ev.To != probe.Failure || ev.Consecutive != 5 || ev.Time.Sub(t0) != 400*time.Millisecond {
		t.Fatalf("transition = %+v, want liveness failure after 5 failures at 400ms", ev)
	}
	b.set(200)
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	if ev := h.next(engine.KindTransition); ev.To != probe.Success || !ev.Initialized {
		t.Fatalf("transition = %+v, want success that initializes", ev)
	}
	b.set(503)
	h.advance(200*time.Millisecond, 10*time.Millisecond) // failureThreshold (2) now applies
	if ev := h.next(engine.KindTransition); ev.To != probe.Failure || ev.Consecutive != 2 || ev.Time.Sub(t0) != 700*time.Millisecond {
		t.Fatalf("transition = %+v, want failure after 2 failures at 700ms", ev)
	}
	// Liveness failures are published and probing goes on.
	before := b.hits.Load()
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	if b.hits.Load()-before != 3 {
		t.Errorf("probes after a liveness failure = %d, want 3 (probing continues)", b.hits.Load()-before)
	}
}

func TestLivenessFirstPassIsInitializedEvent(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "app", LivenessProbe: b.probe(1, -900)})
	ev := h.next(engine.KindInitialized, engine.KindTransition)
	if ev.Kind != engine.KindInitialized || ev.Probe != probe.Liveness || ev.From != probe.Success || ev.To != probe.Success {
		t.Fatalf("event = %+v, want INITIALIZED of liveness without a transition", ev)
	}
	if !h.get("app").Status.Probes[probe.Liveness].HasInitialized {
		t.Error("hasInitialized not set")
	}
}

func TestFastUntilReady(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(503)
	p := b.probe(1, 0) // 1s period once ready
	p.InitialPeriodMilliseconds = ptr[int32](100)
	h.create(&target.Spec{Name: "cold", ReadinessProbe: p})
	got := h.probeTimes("cold", probe.Readiness, 250*time.Millisecond, 10*time.Millisecond)
	if want := ms(100, 200); !slices.Equal(got, want) {
		t.Fatalf("probe times while not ready = %v, want %v (every 100ms)", got, want)
	}
	b.set(200)
	got = h.probeTimes("cold", probe.Readiness, 2250*time.Millisecond, 10*time.Millisecond)
	// Ready at 300ms; then every second from there.
	if want := ms(300, 1300, 2300); !slices.Equal(got, want) {
		t.Fatalf("probe times = %v, want %v (100ms until ready, then 1s)", got, want)
	}
	if eff := h.get("cold").Status.Probes[probe.Readiness].Effective; eff.InitialPeriod != 100*time.Millisecond || eff.Period != time.Second {
		t.Errorf("effective = %+v, want initial period 100ms, period 1s", eff)
	}
}

func TestTimeoutIsAFailureThatSaysSo(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	b.hang.Store(true)
	p := b.probe(1, -900)
	p.TimeoutSeconds, p.TimeoutMilliseconds = 0, ptr[int32](-500) // 1s default - 500ms
	p.FailureThreshold = 1
	h.create(&target.Spec{Name: "hung", LivenessProbe: p})
	h.advance(600*time.Millisecond, 10*time.Millisecond)
	ev := h.next(engine.KindTransition)
	if ev.To != probe.Failure || !strings.HasPrefix(ev.Message, "probe timed out after 500ms") || ev.Time.Sub(t0) != 500*time.Millisecond {
		t.Fatalf("transition = %+v, want a failure at 500ms saying the probe timed out after 500ms", ev)
	}
	if skipped := h.eng.Stats().SkippedOverlap; skipped == 0 {
		t.Errorf("no fire was skipped while the probe hung for 5 periods; a probe must never overlap itself")
	}
}

func TestClosedPortFails(t *testing.T) {
	h := newHarness(t)
	port := refused.Port(t)
	p := &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}}, PeriodSeconds: 1, FailureThreshold: 1}
	h.create(&target.Spec{Name: "gone", LivenessProbe: p})
	ev := h.next(engine.KindTransition)
	if ev.To != probe.Failure || !strings.Contains(ev.Message, "connection refused") {
		t.Fatalf("transition = %+v, want failure with connection refused", ev)
	}
}
