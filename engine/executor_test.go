package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// gateCheckers open checkers that, while hold is set, hold every Check
// until release is closed (or the check's context ends), and record whether a checker was ever closed
// while one of its checks ran: the Checker contract forbids it.
type gateCheckers struct {
	h       *harness
	hold    atomic.Bool
	release chan struct{} // closed: every held check passes
	started chan string   // receives the probe's name when a check begins

	mu       sync.Mutex
	checkers []*gateChecker // guarded by mu
}

// newGateHarness runs a harness whose checkers are gateCheckers.
func newGateHarness(t *testing.T, mod ...func(*engine.Options)) (*harness, *gateCheckers) {
	g := &gateCheckers{release: make(chan struct{}), started: make(chan string, 64)}
	g.hold.Store(true)
	mod = append(mod, func(o *engine.Options) { o.Checkers = g })
	h := newHarness(t, mod...)
	g.h = h // no check runs before a target is created
	return h, g
}

func (g *gateCheckers) Open(name string, _ probe.Type, h probe.Handler) (engine.Checker, error) {
	c := &gateChecker{g: g, name: name}
	if h.TCPSocket != nil {
		c.label = h.TCPSocket.Host
	}
	g.mu.Lock()
	g.checkers = append(g.checkers, c)
	g.mu.Unlock()
	return c, nil
}

// overlaps returns the checkers closed while a check of theirs ran, and
// the number closed in all among those that ran a check (Create opens a
// checker of each probe to validate it, and closes it at once).
func (g *gateCheckers) overlaps() (overlapping []string, closed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.checkers {
		if c.closedDuringCheck.Load() {
			overlapping = append(overlapping, c.name+"/"+c.label)
		}
		if c.closed.Load() && c.ran.Load() {
			closed++
		}
	}
	return overlapping, closed
}

type gateChecker struct {
	g           *gateCheckers
	name, label string

	checking          atomic.Int32
	ran               atomic.Bool
	closed            atomic.Bool
	closedDuringCheck atomic.Bool
}

func (c *gateChecker) Check(ctx context.Context) probe.Outcome {
	c.ran.Store(true)
	c.checking.Add(1)
	defer c.checking.Add(-1)
	c.g.h.hanging.Add(1)
	defer c.g.h.hanging.Add(-1)
	c.g.started <- c.name
	if !c.g.hold.Load() {
		return probe.Outcome{Result: probe.Success, Message: c.label}
	}
	select {
	case <-c.g.release:
		return probe.Outcome{Result: probe.Success, Message: c.label}
	case <-ctx.Done():
		// Linger a little, as a real client finishing its I/O does: a
		// Close that does not wait for the check would overlap it.
		time.Sleep(5 * time.Millisecond)
		return probe.Outcome{Result: probe.Failure, Message: ctx.Err().Error()}
	}
}

func (c *gateChecker) Close() {
	if c.checking.Load() > 0 {
		c.closedDuringCheck.Store(true)
	}
	c.closed.Store(true)
}

func tcpProbe(label string, periodSeconds int32) *probe.Spec {
	return &probe.Spec{
		Handler:       probe.Handler{TCPSocket: &probe.TCPSocket{Host: label, Port: 1}},
		PeriodSeconds: periodSeconds,
	}
}

func waitStarted(t *testing.T, g *gateCheckers, name string) {
	t.Helper()
	for {
		select {
		case got := <-g.started:
			if got == name {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no check of %s started within 10s", name)
		}
	}
}

// TestTriggeredRunIsWaitedForAndClosedAfter: a triggered run is one of the
// executor's runs. Run does not return while it is in progress, and its
// checker is closed only once it has returned (before, a trigger checked
// on the caller's goroutine, which Run did not wait for, and Run closed
// the checker under it).
func TestTriggeredRunIsWaitedForAndClosedAfter(t *testing.T) {
	h, g := newGateHarness(t)
	g.hold.Store(false)
	h.create(&target.Spec{Name: "web", ReadinessProbe: tcpProbe("a", 100)})
	waitStarted(t, g, "web") // the first run, at creation, passes
	h.quiesce()
	g.hold.Store(true)

	triggered := make(chan error, 1)
	go func() {
		_, _, err := h.eng.Trigger(context.Background(), "web", probe.Readiness)
		triggered <- err
	}()
	waitStarted(t, g, "web")
	h.stop() // cancels the engine with the triggered check in progress
	if overlapping, closed := g.overlaps(); len(overlapping) > 0 || closed == 0 {
		t.Errorf("checkers closed during a check: %v (%d closed); want none, and every checker closed once Run returned", overlapping, closed)
	}
	select {
	case err := <-triggered:
		if err == nil {
			t.Errorf("Trigger of a run cancelled by the shutdown = nil error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Trigger did not return after Run returned")
	}
}

// TestReplacedCheckerIsClosedAfterItsRun: an update that changes a
// handler while a run of the old one is in progress closes the old
// checker only once that run has ended.
func TestReplacedCheckerIsClosedAfterItsRun(t *testing.T) {
	h, g := newGateHarness(t)
	h.create(&target.Spec{Name: "web", ReadinessProbe: tcpProbe("old", 1)})
	waitStarted(t, g, "web") // the first run, hanging on the old handler
	if _, err := h.eng.Update(context.Background(), &target.Spec{Name: "web", ReadinessProbe: tcpProbe("new", 1)}); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	h.quiesce()
	overlapping, closed := g.overlaps()
	if len(overlapping) > 0 {
		t.Errorf("checkers closed during a check: %v", overlapping)
	}
	if closed != 1 {
		t.Errorf("%d checkers closed, want the replaced one", closed)
	}
}

// TestTriggerCountsTowardMaxInflight: a trigger is a run like any other:
// with MaxInflight runs in progress it is refused, not run beside them.
func TestTriggerCountsTowardMaxInflight(t *testing.T) {
	h, g := newGateHarness(t, func(o *engine.Options) { o.MaxInflight = 1 })
	defer close(g.release)
	h.create(&target.Spec{Name: "slow", ReadinessProbe: tcpProbe("a", 100)})
	waitStarted(t, g, "slow")
	h.create(&target.Spec{Name: "other", ReadinessProbe: tcpProbe("b", 100)}) // its first run is skipped: busy
	_, _, err := h.eng.Trigger(context.Background(), "other", probe.Readiness)
	if !errors.Is(err, engine.ErrResourceExhausted) || !strings.Contains(err.Error(), "--max-inflight") {
		t.Fatalf("Trigger with MaxInflight runs in progress = %v, want ErrResourceExhausted naming --max-inflight", err)
	}
	if got := h.eng.Stats().SkippedBusy; got != 1 {
		t.Errorf("Stats().SkippedBusy = %d, want 1 (other's first run)", got)
	}
}

// TestOverlapIsCountedOnce: a probe still running when it is due again is
// skipped, and counted in one place, whichever way its run started (here
// a fire of the wheel: the first run is after an initial delay).
func TestOverlapIsCountedOnce(t *testing.T) {
	h := newHarness(t)
	b := h.newBackend(200)
	b.hang.Store(true)
	p := b.probe(1, -900)
	p.InitialDelayMilliseconds = ptr[int32](10)
	p.TimeoutSeconds, p.TimeoutMilliseconds = 0, ptr[int32](-450) // 550ms: it hangs through 5 due times
	h.create(&target.Spec{Name: "hung", ReadinessProbe: p})
	h.advance(550*time.Millisecond, 10*time.Millisecond)
	st := h.eng.Stats()
	if st.SkippedOverlap != 5 {
		t.Errorf("skipped as overlap: %d, want 5 (110..510ms)", st.SkippedOverlap)
	}
}
