package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
)

// stubStore is a Store for internal tests (store/memory imports this
// package): it keeps the events it is given.
type stubStore struct {
	mu     sync.Mutex
	rev    uint64  // guarded by mu
	events []Event // guarded by mu
	log    CommitLog
}

func (s *stubStore) Load(context.Context) (*Stored, error) {
	s.log.Start()
	return &Stored{}, nil
}

func (s *stubStore) Commit(_ context.Context, changes []*Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range changes {
		s.rev++
		c.SetRevision(s.rev)
		s.events = append(s.events, c.Event)
	}
	s.log.Append(changes)
	return nil
}

func (s *stubStore) Follow(ctx context.Context, after uint64, deliver func(Delivery)) error {
	return s.log.Follow(ctx, after, deliver)
}

func (s *stubStore) Compact(context.Context, uint64) error { return nil }
func (s *stubStore) Close() error                          { return nil }

func (s *stubStore) committed() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// passingCheckers open checkers that always pass, counting their runs.
type passingCheckers struct{ runs atomic.Int64 }

func (c *passingCheckers) Open(string, probe.Type, probe.Handler) (Checker, error) {
	return passingChecker{c}, nil
}

type passingChecker struct{ c *passingCheckers }

func (p passingChecker) Check(context.Context) probe.Outcome {
	p.c.runs.Add(1)
	return probe.Outcome{Result: probe.Success}
}

func (passingChecker) Close() {}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

// TestRunStartedAfterDeleteIsDropped: a run of a probe that starts after
// its target was deleted — a fire the timer wheel collected before Delete
// cancelled it, or a run whose goroutine reads the probe's generation
// only after Delete bumped it — publishes nothing: readiness stays the
// FAILURE Delete published, and no transition follows TERMINATING (nor
// DELETED, which the crash test caught).
func TestRunStartedAfterDeleteIsDropped(t *testing.T) {
	store, checkers := &stubStore{}, &passingCheckers{}
	ctx, cancel := context.WithCancel(context.Background())
	e, err := Open(ctx, Options{Clock: clockwork.NewFakeClock(), Store: store, Checkers: checkers, Shards: 1})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	spec := &target.Spec{
		Name: "web",
		ReadinessProbe: &probe.Spec{
			Handler:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: 8080, Path: "/"}},
			PeriodSeconds: 1,
		},
		// Terminating for 10s (on the fake clock: until the test ends).
		Lifecycle: &target.Lifecycle{PreStop: &target.Handler{Sleep: &target.SleepAction{Seconds: 10}}},
	}
	if _, err := e.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "ready after the first run", func() bool {
		tg, err := e.Get(ctx, "web")
		return err == nil && tg.Status.Ready()
	})
	if _, err := e.Delete(ctx, "web"); err != nil {
		t.Fatal(err)
	}

	e.mu.Lock()
	en := e.targets["web"]
	e.mu.Unlock()
	en.mu.Lock()
	r := en.runners[probe.Readiness]
	en.mu.Unlock()
	runs := checkers.runs.Load()
	e.exec.runNow(r) // what dispatch does with a fire collected before the cancel
	waitUntil(t, "the run", func() bool { return checkers.runs.Load() > runs && e.exec.inflight.Load() == 0 })
	// Changes are published in the order they are submitted: once this
	// create is, anything the run submitted is too.
	if _, err := e.Create(ctx, &target.Spec{Name: "marker"}); err != nil {
		t.Fatal(err)
	}

	terminating := false
	for _, ev := range store.committed() {
		switch {
		case ev.Name != "web":
		case ev.Kind == KindTerminating:
			terminating = true
		case terminating:
			t.Errorf("after TERMINATING: %s %s %s→%s (reason %s)", ev.Kind, ev.Probe, ev.From, ev.To, ev.Reason)
		}
	}
	tg, err := e.Get(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got := tg.Status.Probes[probe.Readiness].Result; tg.Status.Phase != Terminating || got != probe.Failure {
		t.Errorf("after the run: %v, readiness %v; want terminating, readiness failure (probes stop at Delete)", tg.Status.Phase, got)
	}
}
