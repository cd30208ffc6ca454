package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/engine/wheel"
)

// runEngine runs an engine over store with checkers on a fake clock;
// before runs on the opened engine before Run.
func runEngine(t *testing.T, store Store, checkers Checkers, before func(*Engine)) *Engine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := Open(ctx, Options{Clock: clockwork.NewFakeClockAt(time.Unix(1e9, 0)), Store: store, Checkers: checkers, Shards: 1})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if before != nil {
		before(e)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

func twoProbes(name string) *target.Spec {
	p := func() *probe.Spec {
		return &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 1}}, PeriodSeconds: 1}
	}
	return &target.Spec{Name: name, LivenessProbe: p(), ReadinessProbe: p()}
}

// TestCreateRefusedBeyondWheelCapacity: a target whose probes the wheel
// could not hold is refused at create (and an update adding such a probe
// at update), naming the limit, instead of being registered and never
// probed; IDs freed by a removal are used again.
func TestCreateRefusedBeyondWheelCapacity(t *testing.T) {
	e := runEngine(t, &stubStore{}, &passingCheckers{}, func(e *Engine) { e.exec.capacity = 3 })
	ctx := context.Background()
	if _, err := e.Create(ctx, twoProbes("a")); err != nil {
		t.Fatal(err)
	}
	// The wheel's IDs are not reserved at create: the follow loop takes
	// them when it applies the create, a moment after Create returns.
	scheduled := func(n int) func() bool {
		return func() bool {
			e.exec.mu.Lock()
			defer e.exec.mu.Unlock()
			return len(e.exec.slots)-len(e.exec.free) == n
		}
	}
	waitUntil(t, "a's probes scheduled", scheduled(2))
	_, err := e.Create(ctx, twoProbes("b"))
	if !errors.Is(err, ErrResourceExhausted) || !strings.Contains(err.Error(), "at most 3 probes can be scheduled") {
		t.Fatalf("Create beyond the capacity = %v, want ErrResourceExhausted naming the limit", err)
	}
	if _, err := e.Get(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(b) after the refused create = %v, want ErrNotFound", err)
	}
	if _, err := e.Create(ctx, &target.Spec{Name: "c", ReadinessProbe: twoProbes("").ReadinessProbe}); err != nil {
		t.Fatalf("Create of a target with the one free ID: %v (the refused create must give its ID back)", err)
	}
	waitUntil(t, "c's probe scheduled", scheduled(3))
	upd := twoProbes("c")
	if _, err := e.Update(ctx, upd); !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("Update adding a probe beyond the capacity = %v, want ErrResourceExhausted", err)
	}
	if tg, _ := e.Get(ctx, "c"); tg.Spec.LivenessProbe != nil {
		t.Errorf("the refused update changed the target: %+v", tg.Spec)
	}
	if _, err := e.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a removed", func() bool {
		_, err := e.Get(ctx, "a")
		return errors.Is(err, ErrNotFound)
	})
	waitUntil(t, "a's probes' IDs freed", scheduled(1))
	if _, err := e.Create(ctx, twoProbes("d")); err != nil {
		t.Errorf("Create after a removal freed two IDs: %v", err)
	}
	if got := e.Stats().ScheduleErrors; got != 0 {
		t.Errorf("Stats().ScheduleErrors = %d, want 0", got)
	}
}

// TestLongestPeriodIsScheduled: every period validation accepts fits the
// wheel, so no valid probe is silently left unscheduled.
func TestLongestPeriodIsScheduled(t *testing.T) {
	e := runEngine(t, &stubStore{}, &passingCheckers{}, nil)
	ms := int32(999)
	spec := &target.Spec{Name: "slow", ReadinessProbe: &probe.Spec{
		Handler:             probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: 1}},
		PeriodSeconds:       math.MaxInt32,
		PeriodMilliseconds:  &ms,
		InitialDelaySeconds: math.MaxInt32,
	}}
	if errs := target.Validate(spec, nil, e.targetOptions()); len(errs) > 0 {
		t.Fatalf("the spec is invalid: %v", errs)
	}
	if _, err := e.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the probe scheduled", func() bool { st := e.Stats(); return st.Wheel.Scheduled > 0 || st.ScheduleErrors > 0 })
	if st := e.Stats(); st.ScheduleErrors != 0 || st.Wheel.Scheduled != 1 {
		t.Errorf("schedule errors %d, scheduled %d; want 0 and 1", st.ScheduleErrors, st.Wheel.Scheduled)
	}
}

// storedStore is a stubStore whose Load returns targets.
type storedStore struct {
	stubStore
	targets []*Target
}

func (s *storedStore) Load(context.Context) (*Stored, error) {
	return &Stored{Targets: s.targets, Revision: 10}, nil
}

// TestStepWithoutRun drives one run of a probe with no Run and no
// goroutine: the step checks on the caller's goroutine, applies the
// outcome and submits the change; a stale run checks nothing.
func TestStepWithoutRun(t *testing.T) {
	now := time.Unix(1e9, 0)
	spec := &target.Spec{Name: "web", ReadinessProbe: twoProbes("").ReadinessProbe}
	stored := &Target{Spec: spec, Status: Status{Phase: Active, CreateTime: now, StartTime: now, Revision: 10}}
	stored.Status.Probes[probe.Readiness] = ProbeStatus{Present: true, Result: probe.Failure}
	checkers := &passingCheckers{}
	e, err := Open(context.Background(), Options{Clock: clockwork.NewFakeClockAt(now), Store: &storedStore{targets: []*Target{stored}}, Checkers: checkers})
	if err != nil {
		t.Fatal(err)
	}
	e.ownAll() // what Run does first
	en, _ := e.lookup("web")
	r := en.runners[probe.Readiness]

	begin := func() { // what the executor does before a run
		r.busy.Store(true)
		e.exec.acquire()
	}
	begin()
	out, change := e.step(context.Background(), r, r.gen.Load())
	if out.Result != probe.Success || checkers.runs.Load() != 1 {
		t.Fatalf("step = %+v after %d checks, want one passing check", out, checkers.runs.Load())
	}
	if change == nil || change.Event.Kind != KindTransition || change.Event.To != probe.Success || !change.Event.Ready {
		t.Fatalf("change = %+v, want the readiness transition to success", change)
	}
	if r.busy.Load() {
		t.Error("the run left the probe busy")
	}
	if pending := e.commits.take(true); len(pending) != 1 || pending[0].change != change {
		t.Errorf("submitted %d changes, want the transition", len(pending))
	}

	if n := e.exec.inflight.Load(); n != 0 {
		t.Errorf("%d runs in flight after the step", n)
	}
	begin()
	out, change = e.step(context.Background(), r, r.gen.Load()-1) // a fire from before an update
	if out.Result != probe.Unknown || out.Message != msgRunCancelled || change != nil || checkers.runs.Load() != 1 {
		t.Errorf("stale step = %+v, change %v, %d checks; want cancelled, nothing checked or changed", out, change, checkers.runs.Load())
	}
}

// TestSkippedFireDoesNotAllocate: a due fire skipped because maxInflight
// runs are in progress is counted and costs no allocation (the refusal's
// message, which names the bound, is formatted only for a trigger that
// reports it). Not parallel: it counts allocations.
func TestSkippedFireDoesNotAllocate(t *testing.T) {
	clock := clockwork.NewFakeClock()
	o := Options{MaxInflight: 1, MaxUnwritten: 1, Tick: time.Millisecond, Shards: 1}
	x := newExecutor(clock, &o, func(context.Context, *runner, uint64) {})
	x.inflight.Store(1) // the one run allowed is in progress
	r := &runner{}
	x.slots = []*runner{r}
	fires := []wheel.Fire{{ID: 0, Due: clock.Now()}}
	allocs := testing.AllocsPerRun(100, func() { x.dispatch(fires) })
	if allocs != 0 {
		t.Errorf("a skipped fire allocates %v times; want 0", allocs)
	}
	if got := x.skippedBusy.Load(); got < 100 {
		t.Errorf("skippedBusy = %d; want every fire counted", got)
	}
	if r.busy.Load() {
		t.Error("the skipped probe stays busy")
	}
	if _, err := x.triggerLocked(r); !errors.Is(err, ErrResourceExhausted) || !strings.Contains(err.Error(), "at most 1 probes run at once (--max-inflight)") {
		t.Errorf("trigger at the bound = %v; want ErrResourceExhausted naming the bound", err)
	}
}

// TestIdleWorkersTrimmedWithinASecond: after a burst of runs, the probe
// goroutines it left idle end within one second of quiet on the engine's
// clock, down to keepIdleWorkers per CPU.
func TestIdleWorkersTrimmedWithinASecond(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	o := Options{MaxInflight: 1000, MaxUnwritten: 1, Tick: time.Millisecond, Shards: 1}
	release := make(chan struct{})
	var started sync.WaitGroup
	x := newExecutor(clock, &o, func(context.Context, *runner, uint64) {
		started.Done()
		<-release
	})
	ctx, cancel := context.WithCancel(t.Context())
	x.begin(ctx)
	t.Cleanup(func() {
		cancel()
		x.shutdown()
	})
	p := x.pool.Load()
	const burst = 100
	started.Add(burst)
	for range burst {
		if !p.submit(job{r: &runner{}}) {
			t.Fatal("submit refused")
		}
	}
	started.Wait()
	close(release)
	keep := p.keepIdle
	waitUntil(t, "the burst's workers idle", func() bool { return p.idle.Load() == min(burst, p.maxIdle) })
	// One second of quiet, in resizeEvery steps: the wheel's timer and
	// the resize ticker wait on the clock before each.
	for range resizeSamples {
		bctx, bcancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := clock.BlockUntilContext(bctx, 2)
		bcancel()
		if err != nil {
			t.Fatalf("waiting for the wheel's timer and the resize ticker: %v", err)
		}
		clock.Advance(resizeEvery)
	}
	waitUntil(t, fmt.Sprintf("idle workers down to %d", keep), func() bool { return p.idle.Load() == keep })
}

// TestStaleFireIgnoredByGeneration: a fire collected by the wheel for an
// earlier schedule of a wheel ID — that of the ID's previous holder, whose
// probe an update replaced, or of this probe before it was unscheduled and
// scheduled again — starts nothing, whatever its due time; a fire of the
// current schedule starts a run. The fires are delivered as the wheel's
// driver does after it has released its lock, so they race with nothing.
// At maxInflight runs in progress a started fire is counted as skipped
// (busy), which is how the test sees that it was taken as current.
func TestStaleFireIgnoredByGeneration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// stale schedules r, returns a fire of that schedule, then makes
		// a new schedule (of r or of the ID's next holder, returned).
		stale func(t *testing.T, x *executor, r *runner, now time.Time) (wheel.Fire, *runner)
	}{
		{"previous holder of the ID, due after the new holder's first run", func(t *testing.T, x *executor, r *runner, now time.Time) (wheel.Fire, *runner) {
			if err := x.scheduleLocked(r, now.Add(10*time.Second), time.Second); err != nil {
				t.Fatal(err)
			}
			f := fireOf(r, now.Add(10*time.Second))
			x.retireLocked(r) // an update replaced the probe
			next := &runner{entry: r.entry}
			if err := x.alloc(next); err != nil {
				t.Fatal(err)
			}
			if next.id != r.id {
				t.Fatalf("the new probe has ID %d, want the freed %d", next.id, r.id)
			}
			if err := x.scheduleLocked(next, now.Add(time.Second), time.Second); err != nil {
				t.Fatal(err)
			}
			return f, next
		}},
		{"previous holder of the ID, not scheduled yet", func(t *testing.T, x *executor, r *runner, now time.Time) (wheel.Fire, *runner) {
			if err := x.scheduleLocked(r, now, time.Second); err != nil {
				t.Fatal(err)
			}
			f := fireOf(r, now)
			x.retireLocked(r)
			next := &runner{entry: r.entry}
			if err := x.alloc(next); err != nil {
				t.Fatal(err)
			}
			return f, next
		}},
		{"same probe, unscheduled and spread again at the fire's due time", func(t *testing.T, x *executor, r *runner, now time.Time) (wheel.Fire, *runner) {
			if err := x.spreadLocked(r, now, time.Second); err != nil {
				t.Fatal(err)
			}
			f := fireOf(r, now)
			x.unscheduleLocked(r) // disowned, then owned again
			if err := x.spreadLocked(r, now, time.Second); err != nil {
				t.Fatal(err)
			}
			return f, r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			o := Options{MaxInflight: 1, MaxUnwritten: 1, Tick: time.Millisecond, Shards: 1}
			x := newExecutor(clock, &o, func(context.Context, *runner, uint64) {})
			x.inflight.Store(1) // a fire taken as current is counted as skipped
			r := &runner{entry: &entry{name: "web"}}
			if err := x.alloc(r); err != nil {
				t.Fatal(err)
			}
			stale, current := tt.stale(t, x, r, clock.Now())
			x.dispatch([]wheel.Fire{stale})
			if got := x.skippedBusy.Load(); got != 0 {
				t.Fatalf("the stale fire %+v was taken as current (%d skipped as busy)", stale, got)
			}
			if current.scheduled {
				x.dispatch([]wheel.Fire{fireOf(current, clock.Now())})
				if got := x.skippedBusy.Load(); got != 1 {
					t.Errorf("a fire of the current schedule: %d skipped as busy, want 1 (taken as current)", got)
				}
			}
		})
	}
}

// fireOf returns a fire of r's current schedule due at due, as the wheel
// delivers it.
func fireOf(r *runner, due time.Time) wheel.Fire {
	return wheel.Fire{ID: r.id, Gen: r.schedGen.Load(), Due: due}
}
