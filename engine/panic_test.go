package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// panicCheckers is fault injection: the checkers of target "boom" panic
// while panicking is set, and otherwise do what the real checkers do.
type panicCheckers struct {
	real      engine.Checkers
	panicking *atomic.Bool
}

func (p panicCheckers) Open(name string, typ probe.Type, h probe.Handler) (engine.Checker, error) {
	c, err := p.real.Open(name, typ, h)
	if err != nil || name != "boom" {
		return c, err
	}
	return &panicChecker{Checker: c, panicking: p.panicking}, nil
}

type panicChecker struct {
	engine.Checker
	panicking *atomic.Bool
}

func (c *panicChecker) Check(ctx context.Context) probe.Outcome {
	if c.panicking.Load() {
		panic("boom: injected checker fault")
	}
	return c.Checker.Check(ctx)
}

// TestCheckerPanicIsUnknownAndProbingContinues: a checker that panics on
// every run is an Unknown outcome each time; it counts toward no run (as
// kubelet discards prober errors), but at the failure threshold the
// published result becomes Unknown with the panic's message, so the fault
// is visible in events and Get instead of freezing the last result.
func TestCheckerPanicIsUnknownAndProbingContinues(t *testing.T) {
	var panicking atomic.Bool
	panicking.Store(true)
	h := newHarness(t, func(o *engine.Options) {
		o.Checkers = panicCheckers{real: check.New(check.Options{}), panicking: &panicking}
	})
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "boom", ReadinessProbe: b.probe(1, -900)})
	h.create(&target.Spec{Name: "calm", ReadinessProbe: b.probe(1, -900)})
	h.advance(300*time.Millisecond, time.Millisecond)

	st := h.get("boom").Status.Probes[probe.Readiness]
	const wantMsg = "checker panicked: boom: injected checker fault"
	if st.LastMessage != wantMsg || st.Result != probe.Unknown || st.ProbesTotal < 4 {
		t.Fatalf("boom readiness = result %v, message %q, %d probes; want unknown (published at the failure threshold), %q, >= 4 probes",
			st.Result, st.LastMessage, st.ProbesTotal, wantMsg)
	}
	ev := h.next(engine.KindTransition)
	for ev.Name != "boom" {
		ev = h.next(engine.KindTransition)
	}
	if ev.From != probe.Failure || ev.To != probe.Unknown || ev.Message != wantMsg || ev.Consecutive != 3 || ev.Time.Sub(t0) != 200*time.Millisecond {
		t.Fatalf("transition = %+v, want failure→unknown after the 3rd panic (200ms), saying why", ev)
	}
	for i, s := range st.Recent {
		if s.Result != probe.Unknown {
			t.Errorf("recent sample %d = %v, want unknown", i, s.Result)
		}
	}
	if got := h.eng.Stats().Panics; got != st.ProbesTotal {
		t.Errorf("Stats().Panics = %d, want one per probe run (%d)", got, st.ProbesTotal)
	}
	if calm := h.get("calm"); !calm.Status.Ready() {
		t.Errorf("calm target not ready: a panic in another target's checker must not affect it")
	}

	// A triggered run reports the panic as its outcome.
	out, _, err := h.eng.Trigger(context.Background(), "boom", probe.Readiness)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != probe.Unknown || out.Message != wantMsg {
		t.Fatalf("Trigger = %v %q, want unknown %q", out.Result, out.Message, wantMsg)
	}

	// The fault goes away: the next scheduled run passes.
	panicking.Store(false)
	h.advance(100*time.Millisecond, time.Millisecond)
	ev = h.next(engine.KindTransition)
	for ev.Name != "boom" {
		ev = h.next(engine.KindTransition)
	}
	if ev.From != probe.Unknown || ev.To != probe.Success || !ev.Ready {
		t.Fatalf("transition = %+v, want boom unknown→success once the checker stops panicking", ev)
	}
	if got := h.get("boom").Status.Probes[probe.Readiness].LastMessage; got == wantMsg {
		t.Errorf("last message still %q after a passing run", got)
	}
}

// utf8Checkers' checkers answer with bytes that are not UTF-8, as a
// hostile server's reply quoted in a message would be.
type utf8Checkers struct{}

func (utf8Checkers) Open(string, probe.Type, probe.Handler) (engine.Checker, error) {
	return utf8Checker{}, nil
}

type utf8Checker struct{}

func (utf8Checker) Check(context.Context) probe.Outcome {
	return probe.Outcome{Result: probe.Success, Message: "status: 300 \xf1\xff"}
}

func (utf8Checker) Close() {}

func TestCheckerMessagesBecomeValidUTF8(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.Checkers = utf8Checkers{} })
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "hostile", ReadinessProbe: b.probe(1, -900)})
	ev := h.next(engine.KindTransition)
	const want = "status: 300 \uFFFD" // a run of bad bytes is one replacement
	if ev.Message != want {
		t.Errorf("transition message %q, want %q", ev.Message, want)
	}
	if got := h.get("hostile").Status.Probes[probe.Readiness].LastMessage; got != want {
		t.Errorf("last message %q, want %q", got, want)
	}
}
