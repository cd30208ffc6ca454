package engine_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

func TestDeleteWithGracePeriodCutsThePreStopSleep(t *testing.T) {
	h := newHarness(t)
	h.create(&target.Spec{Name: "web", Lifecycle: sleepFor(20)})
	tg, err := h.eng.Delete(context.Background(), "web", engine.WithGracePeriod(5*time.Second))
	if err != nil || tg.Status.Phase != engine.Terminating {
		t.Fatalf("Delete = %v, %v; want the target terminating", tg, err)
	}
	h.advance(4999*time.Millisecond, time.Second/2)
	h.noEvent(engine.KindDeleted)
	h.advance(time.Millisecond, time.Millisecond)
	if ev := h.next(engine.KindDeleted); ev.Time.Sub(t0) != 5*time.Second {
		t.Errorf("deleted at %v, want 5s (the grace period given, not the 20s sleep)", ev.Time.Sub(t0))
	}
}

// TestDeleteWithGracePeriodZeroFreesAStuckTarget: a target whose grace
// period and preStop sleep are int64 max stays TERMINATING for ever, and
// keeps its name, even across restarts (issue 14, item 10). A delete with
// a grace period of 0 removes it at once, as kubectl delete
// --grace-period=0 --force does.
func TestDeleteWithGracePeriodZeroFreesAStuckTarget(t *testing.T) {
	h := newHarness(t)
	forever := int64(math.MaxInt64)
	h.create(&target.Spec{Name: "stuck", Lifecycle: sleepFor(forever), TerminationGracePeriodSeconds: &forever})
	if _, err := h.eng.Delete(context.Background(), "stuck"); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.advance(time.Hour, 30*time.Minute)
	h.noEvent(engine.KindDeleted)
	if _, err := h.eng.Create(context.Background(), &target.Spec{Name: "stuck"}); !errors.Is(err, engine.ErrAlreadyExists) {
		t.Fatalf("Create of the stuck name: %v, want ErrAlreadyExists", err)
	}
	// A longer grace period changes nothing; 0 removes it now.
	if tg, err := h.eng.Delete(context.Background(), "stuck", engine.WithGracePeriod(time.Duration(math.MaxInt64))); err != nil || tg.Status.Phase != engine.Terminating {
		t.Fatalf("Delete with a longer grace period = %v, %v", tg, err)
	}
	h.noEvent(engine.KindDeleted, engine.KindTerminating)
	if _, err := h.eng.Delete(context.Background(), "stuck", engine.WithGracePeriod(0)); err != nil {
		t.Fatal(err)
	}
	if ev := h.next(engine.KindTerminating); ev.Message == "" {
		t.Errorf("the shortening is published without a message: %+v", ev)
	}
	if ev := h.next(engine.KindDeleted); ev.Time.Sub(t0) != time.Hour {
		t.Errorf("deleted at %v, want at once (1h)", ev.Time.Sub(t0))
	}
	if _, err := h.eng.Create(context.Background(), &target.Spec{Name: "stuck"}); err != nil {
		t.Errorf("Create of the freed name: %v", err)
	}
}

// TestShortenedGracePeriodSurvivesRestart: shortening is durable.
func TestShortenedGracePeriodSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	h.create(&target.Spec{Name: "web", Lifecycle: sleepFor(20)})
	if _, err := h.eng.Delete(context.Background(), "web"); err != nil {
		t.Fatal(err)
	}
	h.advance(2*time.Second, time.Second)
	if _, err := h.eng.Delete(context.Background(), "web", engine.WithGracePeriod(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.advance(9999*time.Millisecond, time.Second/2)
	h.noEvent(engine.KindDeleted)
	h.advance(time.Millisecond, time.Millisecond)
	if ev := h.next(engine.KindDeleted); ev.Time.Sub(t0) != 12*time.Second {
		t.Errorf("deleted at %v, want 12s (10s after the second delete at 2s)", ev.Time.Sub(t0))
	}
}
