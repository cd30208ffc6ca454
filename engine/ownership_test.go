package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
)

// faultStore wraps a store and injects Commit failures: batches holding a
// change of a lost target are refused with an *engine.OwnershipLostError
// naming those targets, and with fail set every Commit fails with it.
// Nothing is written by a refused Commit, as the Store contract says. It
// records every Commit call and the names of its changes.
type faultStore struct {
	engine.Store

	mu      sync.Mutex
	lost    map[string]bool // guarded by mu
	lostAll []string        // when set, every Commit is refused naming these; guarded by mu
	fail    error           // guarded by mu
	hold    chan struct{}   // when set, the next Commit waits until it is closed; guarded by mu
	held    chan struct{}   // closed once a Commit waits on hold; guarded by mu
	holding bool            // a Commit waits on a hold; guarded by mu
	calls   []commitCall    // guarded by mu
}

type commitCall struct {
	names []string
	err   error
}

func newFaultStore(inner engine.Store) *faultStore {
	return &faultStore{Store: inner, lost: make(map[string]bool)}
}

// withFaults makes a harness run over a faultStore wrapping its memory
// store and returns that faultStore.
func withFaults(fs **faultStore) func(*engine.Options) {
	return func(o *engine.Options) {
		*fs = newFaultStore(o.Store)
		o.Store = *fs
	}
}

func (s *faultStore) Commit(ctx context.Context, changes []*engine.Change) error {
	s.mu.Lock()
	if hold := s.hold; hold != nil {
		s.hold, s.holding = nil, true
		close(s.held)
		s.mu.Unlock()
		<-hold
		s.mu.Lock()
		s.holding = false
	}
	call := commitCall{}
	var lost []string
	for _, c := range changes {
		call.names = append(call.names, c.Name)
		if s.lost[c.Name] && !slices.Contains(lost, c.Name) {
			lost = append(lost, c.Name)
		}
	}
	switch {
	case s.fail != nil:
		call.err = s.fail
	case s.lostAll != nil:
		call.err = &engine.OwnershipLostError{Names: s.lostAll}
	case len(lost) > 0:
		call.err = &engine.OwnershipLostError{Names: lost}
	}
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if call.err != nil {
		return call.err
	}
	return s.Store.Commit(ctx, changes)
}

// flushable reports whether no fault is armed or in progress (no hold set
// or waited on, no failure, no lost target): the harness's quiesce may
// then wait for the committer, which a held or refused write would stall.
func (s *faultStore) flushable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hold == nil && !s.holding && s.fail == nil && s.lostAll == nil && len(s.lost) == 0
}

// lose makes the store refuse changes of these targets from now on.
func (s *faultStore) lose(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.lost[n] = true
	}
}

func (s *faultStore) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// holdNext makes the next Commit wait until the returned release is
// called; held is closed once it waits.
func (s *faultStore) holdNext() (held <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold := make(chan struct{})
	s.hold, s.held = hold, make(chan struct{})
	return s.held, func() { close(hold) }
}

// commits returns the Commit calls so far.
func (s *faultStore) commits() []commitCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// waitHeld waits until a Commit waits on the hold.
func waitHeld(t *testing.T, held <-chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no Commit within 10s")
	}
}

// createAsync runs Create in a goroutine; the error arrives on the channel.
func createAsync(eng *engine.Engine, spec *target.Spec) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := eng.Create(context.Background(), spec)
		done <- err
	}()
	return done
}

func receive(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

// TestOwnershipLost: a Commit refused for some targets (fenced off: their
// shard is no longer this replica's) drops their changes — never written
// nor published —, while the other targets' changes of the same batch are
// written on the retry, once. Which targets the engine probes is the
// store's log's to say, not the refusal's: this store's log says every
// one (it has one writer), so the refused target is still probed and
// reported, as it was last written.
func TestOwnershipLost(t *testing.T) {
	var fs *faultStore
	h := newHarness(t, withFaults(&fs))
	backends := map[string]*backend{}
	for _, name := range []string{"lost", "b", "c"} {
		b := h.newBackend(503)
		backends[name] = b
		h.create(&target.Spec{Name: name, ReadinessProbe: b.probe(1, -900)})
	}
	h.advance(100*time.Millisecond, 10*time.Millisecond) // failures: no event

	// Hold the store in a Commit of another target, so that the three
	// transitions queue up and are committed as one batch.
	held, release := fs.holdNext()
	gate := createAsync(h.eng, &target.Spec{Name: "gate"})
	waitHeld(t, held)
	for _, b := range backends {
		b.set(200)
	}
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	fs.lose("lost")
	before := len(fs.commits())
	release()
	if err := receive(t, "Create(gate)", gate); err != nil {
		t.Fatalf("Create(gate) = %v", err)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		ev := h.next(engine.KindTransition)
		if ev.Name == "lost" {
			t.Fatalf("transition of the lost target published: %+v", ev)
		}
		got[ev.Name] = true
	}
	h.noEvent(engine.KindTransition)

	calls := fs.commits()[before:]
	want := []commitCall{
		{names: []string{"gate"}},
		{names: []string{"b", "c", "lost"}, err: engine.ErrOwnershipLost},
		{names: []string{"b", "c"}},
	}
	if len(calls) != len(want) {
		t.Fatalf("Commit calls after the hold: %+v, want %d: the gate, the refused batch, its retry without the lost target", calls, len(want))
	}
	for i, c := range calls {
		names := slices.Sorted(slices.Values(c.names))
		if !slices.Equal(names, want[i].names) || !errors.Is(c.err, want[i].err) || (c.err == nil) != (want[i].err == nil) {
			t.Errorf("Commit call %d: %v, %v; want %v, %v", i, names, c.err, want[i].names, want[i].err)
		}
	}

	// The refused change is gone; nothing is retried, the targets are
	// probed as before, and the lost target is reported as it was last
	// written (not ready).
	hits := backends["lost"].hits.Load()
	others := backends["b"].hits.Load()
	n := len(fs.commits())
	h.advance(time.Second, 50*time.Millisecond)
	if got := backends["b"].hits.Load(); got < others+9 {
		t.Errorf("target b was probed %d times in 1s of 100ms periods, want 10", got-others)
	}
	if got := backends["lost"].hits.Load(); got < hits+9 {
		t.Errorf("the refused target was probed %d times in 1s of 100ms periods, want 10: the store's log says it is owned", got-hits)
	}
	h.flush()
	if got := len(fs.commits()); got != n {
		t.Errorf("%d more Commit calls with nothing changing: %+v", got-n, fs.commits()[n:])
	}
	if tg := h.get("lost"); tg.Status.Ready() {
		t.Errorf("the refused target is reported ready: %+v", tg.Status)
	}
	for _, name := range []string{"b", "c"} {
		if tg := h.get(name); !tg.Status.Ready() {
			t.Errorf("%s is not ready after the batch it shared with the lost target: %+v", name, tg.Status)
		}
	}
	if got := h.eng.Stats().Targets; got != 4 {
		t.Errorf("Stats().Targets = %d, want 4", got)
	}

	// A create the store refuses fails with the error and leaves nothing.
	fs.lose("taken")
	if _, err := h.eng.Create(context.Background(), &target.Spec{Name: "taken"}); !errors.Is(err, engine.ErrOwnershipLost) {
		t.Errorf("Create(taken) = %v, want ErrOwnershipLost", err)
	}
	if _, err := h.eng.Get(context.Background(), "taken"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get(taken) = %v, want ErrNotFound", err)
	}
	// The engine goes on: other changes are committed.
	h.create(&target.Spec{Name: "after"})
}

// TestOwnershipLostNamingNoChangeOfTheBatch: a store that refuses a batch
// for targets none of its changes is about cannot be satisfied by retrying
// without them; the engine stops with the error instead of retrying the
// same batch forever.
func TestOwnershipLostNamingNoChangeOfTheBatch(t *testing.T) {
	var fs *faultStore
	h := newHarness(t, withFaults(&fs))
	h.create(&target.Spec{Name: "a"})
	fs.mu.Lock()
	fs.lostAll = []string{"elsewhere"}
	fs.mu.Unlock()
	before := len(fs.commits())
	created := createAsync(h.eng, &target.Spec{Name: "b"})
	err := receive(t, "Create(b)", created)
	if !errors.Is(err, engine.ErrOwnershipLost) {
		t.Errorf("Create(b) = %v, want the store's ErrOwnershipLost", err)
	}
	runErr := receive(t, "Run", h.done)
	h.cancel()
	h.cancel = nil
	if !errors.Is(runErr, engine.ErrOwnershipLost) {
		t.Errorf("Run = %v, want the store's error", runErr)
	}
	if got := len(fs.commits()) - before; got != 1 {
		t.Errorf("%d Commit calls for one refused batch, want 1", got)
	}
}

// TestStoreErrorStopsTheEngine: a store error that is not lost ownership
// is fail-stop: Run returns it, every waiter (the batch's and those still
// pending) gets it, nothing after it is accepted, and what was
// acknowledged before it is in the store while nothing else is.
func TestStoreErrorStopsTheEngine(t *testing.T) {
	var fs *faultStore
	h := newHarness(t, withFaults(&fs))
	b := h.newBackend(200)
	h.create(&target.Spec{Name: "acked", ReadinessProbe: b.probe(1, -900)})
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	if !h.get("acked").Status.Ready() {
		t.Fatal("acked is not ready")
	}
	stored, err := fs.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	// One Create in the failing Commit, one queued behind it.
	held, release := fs.holdNext()
	inBatch := createAsync(h.eng, &target.Spec{Name: "in-batch"})
	waitHeld(t, held)
	pending := createAsync(h.eng, &target.Spec{Name: "pending"})
	poll.UntilBlocked(t, "engine.(*Engine).Create", 2) // queued behind the held one
	diskErr := errors.New("injected: input/output error")
	fs.setFail(diskErr)
	release()
	for name, ch := range map[string]<-chan error{"in-batch": inBatch, "pending": pending} {
		if err := receive(t, "Create("+name+")", ch); !errors.Is(err, diskErr) && !errors.Is(err, engine.ErrClosed) {
			t.Errorf("Create(%s) = %v, want the store's error", name, err)
		}
	}
	runErr := receive(t, "Run", h.done)
	h.cancel()
	h.cancel = nil
	if !errors.Is(runErr, diskErr) {
		t.Fatalf("Run = %v, want the store's error", runErr)
	}
	if _, err := h.eng.Create(context.Background(), &target.Spec{Name: "late"}); err == nil {
		t.Error("Create after the engine stopped succeeded")
	}

	// Nothing acknowledged is lost, nothing unacknowledged was written.
	after, err := fs.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != stored.Revision || len(after.Targets) != 1 || after.Targets[0].Spec.Name != "acked" {
		t.Errorf("store after the failure: revision %d, %d targets; want revision %d, only acked", after.Revision, len(after.Targets), stored.Revision)
	}
	fs.setFail(nil)
	h.start() // a restart over the same store
	if tg := h.get("acked"); !tg.Status.Ready() {
		t.Errorf("acked after the restart: %+v, want ready", tg.Status)
	}
	for _, name := range []string{"in-batch", "pending", "late"} {
		if _, err := h.eng.Get(context.Background(), name); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Get(%s) after the restart = %v, want ErrNotFound", name, err)
		}
	}
}

// TestCreateCancelledWhileCommitting: a Create whose caller gives up while
// its change is being committed leaves the engine consistent: the target
// either does not exist (nowhere) or exists the way any target does:
// stored, reported, probed and deletable.
func TestCreateCancelledWhileCommitting(t *testing.T) {
	var fs *faultStore
	h := newHarness(t, withFaults(&fs))
	b := h.newBackend(200)
	held, release := fs.holdNext()
	ctx, cancel := context.WithCancel(context.Background())
	created := make(chan error, 1)
	go func() {
		_, err := h.eng.Create(ctx, &target.Spec{Name: "web", ReadinessProbe: b.probe(1, -900)})
		created <- err
	}()
	waitHeld(t, held)
	cancel()
	release()
	err := receive(t, "Create", created)
	h.quiesce()
	h.flush()

	stored, loadErr := fs.Load(context.Background())
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	inStore := slices.ContainsFunc(stored.Targets, func(tg *engine.Target) bool { return tg.Spec.Name == "web" })
	_, getErr := h.eng.Get(context.Background(), "web")
	if !inStore {
		if getErr == nil || err == nil {
			t.Fatalf("Create = %v, Get = %v, but the store does not hold the target", err, getErr)
		}
		return
	}
	if getErr != nil {
		t.Fatalf("the store holds the target (Create = %v), but Get = %v", err, getErr)
	}
	hits := b.hits.Load()
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	if b.hits.Load() == hits {
		t.Errorf("the target is stored and reported (Create = %v) but never probed", err)
	}
	if _, err := h.eng.Delete(context.Background(), "web"); err != nil {
		t.Errorf("Delete of the stored and reported target = %v", err)
	}
}

// TestProbeWaitsForItsTransitionToBeWritten: while the store is behind
// (more probe transitions queued than Options.MaxUnwritten), a probe whose
// transition is not yet written skips its due runs, counted, so the queue
// stays bounded however fast the target flaps; once the write lands the
// probe runs again and its next transition follows. Below the bound (a
// short stall, e.g. an etcd election) the probe runs on and every
// transition it sees is queued and published. No transition is dropped.
func TestProbeWaitsForItsTransitionToBeWritten(t *testing.T) {
	tests := []struct {
		name         string
		maxUnwritten int
		wantRuns     int64 // while the write is held, in 10 periods
		wantSkips    uint64
	}{
		{name: "store behind: the probe waits", maxUnwritten: 1, wantRuns: 0, wantSkips: 10},
		{name: "short stall: the probe runs on", maxUnwritten: 0, wantRuns: 10, wantSkips: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs *faultStore
			h := newHarness(t, withFaults(&fs), func(o *engine.Options) { o.MaxUnwritten = tt.maxUnwritten })
			b := h.newBackend(503)
			p := b.probe(1, -900) // every 100ms
			p.FailureThreshold = 1
			h.create(&target.Spec{Name: "flappy", ReadinessProbe: p})
			h.advance(100*time.Millisecond, 10*time.Millisecond) // failure: no event (readiness starts at failure)

			// The next write waits: the transition to success is queued.
			held, release := fs.holdNext()
			b.set(200)
			h.advance(100*time.Millisecond, 10*time.Millisecond)
			waitHeld(t, held)
			hits := b.hits.Load()
			skipped := h.eng.Stats().SkippedWrite

			// The target flaps on.
			b.set(503)
			h.advance(time.Second, 10*time.Millisecond)
			if got := b.hits.Load() - hits; got != tt.wantRuns {
				t.Errorf("the probe ran %d times in 10 periods while its transition was not written, want %d", got, tt.wantRuns)
			}
			if got := h.eng.Stats().SkippedWrite - skipped; got != tt.wantSkips {
				t.Errorf("SkippedWrite grew by %d in 10 periods, want %d", got, tt.wantSkips)
			}

			release()
			if ev := h.next(engine.KindTransition); ev.To != probe.Success {
				t.Fatalf("first transition after the hold: %+v, want success", ev)
			}
			h.advance(100*time.Millisecond, 10*time.Millisecond)
			if ev := h.next(engine.KindTransition); ev.To != probe.Failure {
				t.Fatalf("next transition: %+v, want failure (seen while held, or the probe runs again)", ev)
			}
		})
	}
}
