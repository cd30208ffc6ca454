package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/feature"
	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
)

func sleepFor(seconds int64) *target.Lifecycle {
	return &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: seconds}}}
}

func TestDeleteDrainsThroughPreStopSleep(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "web", ReadinessProbe: b.probe(1, -900), LivenessProbe: b.probe(1, -900), Lifecycle: sleepFor(2)})
	if ev := h.next(engine.KindTransition); !ev.Ready {
		t.Fatalf("not ready: %+v", ev)
	}
	h.advance(50*time.Millisecond, 10*time.Millisecond)
	tg, err := h.eng.Delete(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Status.Phase != engine.Terminating || tg.Status.Ready() {
		t.Fatalf("Delete returned phase %v ready %v, want terminating and not ready", tg.Status.Phase, tg.Status.Ready())
	}
	ev := h.next(engine.KindTransition, engine.KindTerminating)
	if ev.Kind != engine.KindTransition || ev.Probe != probe.Readiness || ev.To != probe.Failure || ev.Reason != engine.ReasonTerminating || ev.Ready {
		t.Fatalf("first event = %+v, want readiness → failure with reason Terminating", ev)
	}
	if ev := h.next(engine.KindTerminating); ev.Time.Sub(t0) != 50*time.Millisecond || ev.Target.Status.Phase != engine.Terminating {
		t.Fatalf("terminating event = %+v", ev)
	}
	// A second delete changes nothing.
	if again, err := h.eng.Delete(context.Background(), "web"); err != nil || again.Status.Phase != engine.Terminating {
		t.Fatalf("second Delete = %v, %v; want the terminating target", again, err)
	}
	hits := b.hits.Load()
	h.advance(1999*time.Millisecond, 10*time.Millisecond)
	h.noEvent(engine.KindDeleted, engine.KindTerminating)
	if b.hits.Load() != hits {
		t.Errorf("probes ran while terminating: %d", b.hits.Load()-hits)
	}
	h.advance(time.Millisecond, time.Millisecond)
	if ev := h.next(engine.KindDeleted); ev.Time.Sub(t0) != 2050*time.Millisecond {
		t.Fatalf("deleted at %v, want 2.05s (2s preStop sleep after the delete)", ev.Time.Sub(t0))
	}
	if _, err := h.eng.Get(context.Background(), "web"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get after removal: %v, want ErrNotFound", err)
	}
}

func TestDeleteWithoutSleepRemovesAtOnce(t *testing.T) {
	for _, lc := range []*target.Lifecycle{nil, sleepFor(0)} {
		h := newHarness(t)
		h.create(&target.Spec{Name: "web", Lifecycle: lc})
		if _, err := h.eng.Delete(context.Background(), "web"); err != nil {
			t.Fatal(err)
		}
		if ev := h.next(engine.KindDeleted); ev.Time != t0 {
			t.Errorf("lifecycle %+v: deleted at %v, want at once", lc, ev.Time.Sub(t0))
		}
		h.stop()
	}
}

func TestResetStartsOver(t *testing.T) {
	h := newHarness(t)
	startup := h.newBackend(200)
	app := h.newBackend(200)
	h.create(&target.Spec{Name: "app", StartupProbe: startup.probe(1, -900), ReadinessProbe: app.probe(1, -900)})
	h.next(engine.KindTransition) // startup
	if ev := h.next(engine.KindTransition); !ev.Ready {
		t.Fatalf("not ready: %+v", ev)
	}
	h.advance(30*time.Millisecond, 10*time.Millisecond)
	startupHits := startup.hits.Load()
	startup.set(503)
	tg, err := h.eng.Reset(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	st := tg.Status
	if st.Started() || st.Ready() || st.Probes[probe.Startup].HasInitialized || st.Probes[probe.Readiness].HasInitialized ||
		st.Probes[probe.Startup].Result != probe.Unknown || st.StartTime.Sub(t0) != 30*time.Millisecond {
		t.Fatalf("status after reset = %+v, want every probe at its initial state, started at 30ms", st)
	}
	for _, want := range []probe.Type{probe.Startup, probe.Readiness} {
		ev := h.next(engine.KindTransition)
		if ev.Probe != want || ev.Reason != engine.ReasonReset {
			t.Fatalf("event = %+v, want a %v transition with reason Reset", ev, want)
		}
	}
	if ev := h.next(engine.KindReset); ev.Ready || ev.Started {
		t.Fatalf("reset event = %+v", ev)
	}
	appHits := app.hits.Load()
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	if startup.hits.Load() <= startupHits {
		t.Error("the startup probe did not run again after the reset")
	}
	if app.hits.Load() != appHits {
		t.Error("readiness ran before the startup probe passed again")
	}
}

func TestUpdateKeepsStateAndReschedules(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	spec := &target.Spec{Name: "web", ReadinessProbe: b.probe(1, -900)}
	h.create(spec)
	h.next(engine.KindTransition)
	h.advance(150*time.Millisecond, 10*time.Millisecond) // probes at 0, 100

	// A new period (500ms) applies from now: next probe at 150+500.
	updated := &target.Spec{Name: "web", Labels: map[string]string{"v": "2"}, ReadinessProbe: b.probe(1, -500)}
	tg, err := h.eng.Update(context.Background(), updated)
	if err != nil {
		t.Fatal(err)
	}
	ps := tg.Status.Probes[probe.Readiness]
	if !tg.Status.Ready() || !ps.HasInitialized || ps.Effective.Period != 500*time.Millisecond {
		t.Fatalf("after update: ready %v initialized %v period %v; want state kept, period 500ms", tg.Status.Ready(), ps.HasInitialized, ps.Effective.Period)
	}
	if ev := h.next(engine.KindUpdated); ev.Labels["v"] != "2" || !ev.Ready {
		t.Fatalf("updated event = %+v", ev)
	}
	got := h.probeTimes("web", probe.Readiness, 1100*time.Millisecond, 10*time.Millisecond)
	if want := ms(650, 1150); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("probe times after the update = %v, want %v", got, want)
	}

	// Removing the readiness probe makes the target ready by definition;
	// adding a liveness probe starts it from its initial state.
	tg, err = h.eng.Update(context.Background(), &target.Spec{Name: "web", LivenessProbe: b.probe(1, -900)})
	if err != nil {
		t.Fatal(err)
	}
	if tg.Status.Probes[probe.Readiness].Present || !tg.Status.Probes[probe.Liveness].Present || !tg.Status.Ready() {
		t.Fatalf("status = %+v, want readiness gone, liveness present, ready", tg.Status)
	}
}

func TestUpdateRules(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) {
		o.Gates = feature.Gates{}.With(feature.SubSecondProbes, false).With(feature.PodLifecycleSleepActionAllowZero, false)
	})
	if _, err := h.eng.Update(context.Background(), &target.Spec{Name: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Update of an unknown target: %v, want ErrNotFound", err)
	}
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "web", ReadinessProbe: b.probe(1, 0), Lifecycle: sleepFor(1)})
	// The gate is off and the stored target has no milliseconds: rejected.
	_, err := h.eng.Update(context.Background(), &target.Spec{Name: "web", ReadinessProbe: b.probe(1, -500)})
	var list *field.ListError
	if !errors.As(err, &list) || list.List[0].Field != "target.readinessProbe.periodMilliseconds" {
		t.Fatalf("Update adding milliseconds with the gate off: %v, want a field error on periodMilliseconds", err)
	}
	if _, err := h.eng.Delete(context.Background(), "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Update(context.Background(), &target.Spec{Name: "web"}); !errors.Is(err, engine.ErrFailedPrecondition) {
		t.Errorf("Update of a terminating target: %v, want ErrFailedPrecondition", err)
	}
	if _, err := h.eng.Reset(context.Background(), "web"); !errors.Is(err, engine.ErrFailedPrecondition) {
		t.Errorf("Reset of a terminating target: %v, want ErrFailedPrecondition", err)
	}
}

func TestCreateErrors(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) { o.MaxTargets = 1 })
	h.create(&target.Spec{Name: "a"})
	tests := []struct {
		name string
		spec *target.Spec
		want error
	}{
		{"duplicate", &target.Spec{Name: "a"}, engine.ErrAlreadyExists},
		{"invalid", &target.Spec{Name: "B"}, engine.ErrInvalid},
		{"over the limit", &target.Spec{Name: "b"}, engine.ErrResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.eng.Create(context.Background(), tt.spec); !errors.Is(err, tt.want) {
				t.Errorf("Create: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTrigger(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(503)
	startup := h.newBackend(503)
	p := b.probe(100, 0) // a long period: only triggers run it
	h.create(&target.Spec{Name: "web", ReadinessProbe: p})
	h.create(&target.Spec{Name: "gated", StartupProbe: startup.probe(100, 0), ReadinessProbe: p})
	b.set(200)
	out, tg, err := h.eng.Trigger(context.Background(), "web", probe.Readiness)
	if err != nil || out.Result != probe.Success || !tg.Status.Ready() {
		t.Fatalf("Trigger = %+v, ready %v, %v; want success that makes the target ready", out, tg != nil && tg.Status.Ready(), err)
	}
	tests := []struct {
		name   string
		target string
		typ    probe.Type
		want   error
	}{
		{"no such probe", "web", probe.Liveness, engine.ErrNotFound},
		{"no such target", "nope", probe.Readiness, engine.ErrNotFound},
		{"gated by the startup probe", "gated", probe.Readiness, engine.ErrFailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := h.eng.Trigger(context.Background(), tt.target, tt.typ); !errors.Is(err, tt.want) {
				t.Errorf("Trigger: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTriggerJoinsARunningProbe(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	p := b.probe(100, 0)
	p.TimeoutSeconds = 2
	h.create(&target.Spec{Name: "web", LivenessProbe: p})
	h.advance(10*time.Millisecond, 10*time.Millisecond)
	b.hang.Store(true)
	hits := b.hits.Load()
	var wg sync.WaitGroup
	outs := make([]probe.Outcome, 2)
	for i := range outs {
		wg.Go(func() {
			out, _, err := h.eng.Trigger(context.Background(), "web", probe.Liveness)
			if err != nil {
				t.Errorf("Trigger %d: %v", i, err)
			}
			outs[i] = out
		})
		if i == 0 {
			poll.Until(t, "the first trigger's run in the backend", 10*time.Second, func() bool { return h.hanging.Load() > 0 })
		}
	}
	poll.UntilBlocked(t, "engine.(*Engine).Trigger", 2) // the second trigger joined the run
	h.clock.Advance(2 * time.Second)                    // the hanging run times out
	wg.Wait()
	if b.hits.Load()-hits != 1 {
		t.Errorf("%d runs for two concurrent triggers, want 1", b.hits.Load()-hits)
	}
	if outs[0].Result != probe.Failure || outs[1] != outs[0] {
		t.Errorf("outcomes = %+v, want the same timeout failure twice", outs)
	}
}

func TestClientLimitAndAdmission(t *testing.T) {
	h := newHarness(t, func(o *engine.Options) {
		o.MaxTargetsPerClient = 1
		o.Admit = func(spec *target.Spec) field.List {
			if spec.Labels["forbidden"] != "" {
				return field.List{field.Forbidden(field.NewPath("target").Child("labels"), "not here")}
			}
			return nil
		}
	})
	alice := engine.WithClient(context.Background(), "alice")
	bob := engine.WithClient(context.Background(), "bob")
	tg, err := h.eng.Create(alice, &target.Spec{Name: "a1"})
	if err != nil || tg.Status.Client != "alice" {
		t.Fatalf("Create = %+v, %v; want owner alice", tg, err)
	}
	if _, err := h.eng.Create(alice, &target.Spec{Name: "a2"}); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Errorf("second target of alice: %v, want ErrResourceExhausted", err)
	}
	if _, err := h.eng.Create(bob, &target.Spec{Name: "b1"}); err != nil {
		t.Errorf("bob's first target: %v", err)
	}
	if _, err := h.eng.Delete(alice, "a1"); err != nil {
		t.Fatal(err)
	}
	h.next(engine.KindDeleted)
	if _, err := h.eng.Create(alice, &target.Spec{Name: "a2"}); err != nil {
		t.Errorf("alice after deleting her target: %v", err)
	}
	h.restart() // ownership is durable and counted again
	if _, err := h.eng.Create(alice, &target.Spec{Name: "a3"}); !errors.Is(err, engine.ErrResourceExhausted) {
		t.Errorf("alice after a restart: %v, want ErrResourceExhausted", err)
	}
	_, err = h.eng.Create(context.Background(), &target.Spec{Name: "x", Labels: map[string]string{"forbidden": "yes"}})
	var list *field.ListError
	if !errors.As(err, &list) || list.List[0].Field != "target.labels" {
		t.Errorf("Admit error not reported: %v", err)
	}
}
