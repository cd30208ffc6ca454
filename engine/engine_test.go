package engine_test

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFirstProbeAtInitialDelayThenEveryPeriod(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	p := b.probe(1, -900) // 100ms
	p.InitialDelayMilliseconds = ptr[int32](250)
	h.create(&target.Spec{Name: "web", ReadinessProbe: p})
	got := h.probeTimes("web", probe.Readiness, 560*time.Millisecond, time.Millisecond)
	if want := ms(250, 350, 450, 550); !slices.Equal(got, want) {
		t.Errorf("probe times = %v, want %v", got, want)
	}
}

func TestReadinessTransitions(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	p := b.probe(1, -900)
	p.SuccessThreshold, p.FailureThreshold = 2, 2
	h.create(&target.Spec{Name: "web", ReadinessProbe: p})
	if ev := h.next(engine.KindCreated); ev.Ready || ev.Target.Status.Probes[probe.Readiness].Result != probe.Failure {
		t.Fatalf("created: ready %v, readiness %v; want not ready, failure", ev.Ready, ev.Target.Status.Probes[probe.Readiness].Result)
	}
	h.advance(100*time.Millisecond, time.Millisecond) // probe at 0 and 100ms: 2 successes
	ev := h.next(engine.KindTransition)
	if ev.From != probe.Failure || ev.To != probe.Success || !ev.Ready || ev.Consecutive != 2 || ev.Time.Sub(t0) != 100*time.Millisecond || !ev.Initialized {
		t.Fatalf("transition = %+v, want failure→success at 100ms after 2 successes, initialized", ev)
	}
	b.set(503)
	h.advance(100*time.Millisecond, time.Millisecond) // one failure: below threshold
	h.noEvent(engine.KindTransition)
	h.advance(100*time.Millisecond, time.Millisecond)
	ev = h.next(engine.KindTransition)
	if ev.To != probe.Failure || ev.Ready || ev.Time.Sub(t0) != 300*time.Millisecond || ev.Message != "HTTP probe failed with statuscode: 503" {
		t.Fatalf("transition = %+v, want success→failure at 300ms with the status message", ev)
	}
	st := h.get("web").Status.Probes[probe.Readiness]
	if st.ConsecutiveFailures != 2 || !st.HasInitialized || st.Effective.Period != 100*time.Millisecond {
		t.Errorf("status = %+v, want 2 consecutive failures, initialized, period 100ms", st)
	}
}
