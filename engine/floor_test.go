package engine_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRaisedFloorsApplyToRestoredTargets: a target created under
// --min-period 50ms kept probing every 50 ms after a restart with
// --min-period 200ms (issue 14, item 11). A floor protects the operator
// against overload: restored targets are clamped to it, show it in their
// effective timing, and the clamping is logged once per target.
func TestRaisedFloorsApplyToRestoredTargets(t *testing.T) {
	var logs lockedBuffer
	h := newHarness(t, func(o *engine.Options) {
		o.MinPeriod, o.MinTimeout = 50*time.Millisecond, 50*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	b := h.newBackend(200)
	fast := b.probe(1, -950)
	fast.TimeoutSeconds, fast.TimeoutMilliseconds = 1, ptr[int32](-940) // 60ms
	h.create(&target.Spec{Name: "web", ReadinessProbe: fast})
	if got := h.get("web").Status.Probes[probe.Readiness].Effective.Period; got != 50*time.Millisecond {
		t.Fatalf("period before the restart = %v, want 50ms", got)
	}

	h.opts.MinPeriod, h.opts.MinTimeout = 200*time.Millisecond, 300*time.Millisecond
	h.restart()
	eff := h.get("web").Status.Probes[probe.Readiness].Effective
	if eff.Period != 200*time.Millisecond || eff.InitialPeriod != 200*time.Millisecond || eff.Timeout != 300*time.Millisecond {
		t.Errorf("effective after raising the floors = %+v, want period and initial period 200ms, timeout 300ms", eff)
	}
	h.probeTimes("web", probe.Readiness, 400*time.Millisecond, 10*time.Millisecond) // the restart's spread
	times := h.probeTimes("web", probe.Readiness, time.Second, 10*time.Millisecond)
	for i := 1; i < len(times); i++ {
		if d := times[i] - times[i-1]; d != 200*time.Millisecond {
			t.Fatalf("probes at %v: %v apart, want the 200ms floor", times, d)
		}
	}
	if len(times) < 4 {
		t.Errorf("%d probes in a second, want 5 (every 200ms)", len(times))
	}
	if n := strings.Count(logs.String(), "raised to the server's floors"); n != 1 ||
		!strings.Contains(logs.String(), `probes="readiness: period 50ms → 200ms, initial period 50ms → 200ms, timeout 60ms → 300ms"`) {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
	// A watch snapshot shows what the engine uses too.
	w, err := h.eng.Watch(t.Context(), engine.WatchOptions{Names: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bt, err := w.Next(t.Context())
	if err != nil || len(bt.Events) != 1 {
		t.Fatalf("snapshot: %v, %v", bt, err)
	}
	if got := bt.Events[0].Target.Status.Probes[probe.Readiness].Effective.Period; got != 200*time.Millisecond {
		t.Errorf("snapshot's effective period = %v, want 200ms", got)
	}
}
