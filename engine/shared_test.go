package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/memory"
	"github.com/probed/probed/store/storetest"
)

// shardOf puts the names that start with "a-" in shard 0, the others in
// shard 1.
func shardOf(name string) int {
	if strings.HasPrefix(name, "a-") {
		return 0
	}
	return 1
}

// replicas runs two engines, a and b, over one shared store of two
// shards: a owns shard 0 (the names that start with "a-"), b shard 1.
func replicas(t *testing.T, mod ...func(*engine.Options)) (a, b *harness, shared *memory.Shared) {
	shared = memory.NewShared(3, 2, shardOf)
	shared.Assign("a", 0)
	shared.Assign("b", 1)
	return newHarness(t, append([]func(*engine.Options){overShared(shared, "a")}, mod...)...),
		newHarness(t, overShared(shared, "b")), shared
}

// TestReplicasShareOneStore: two engines over one shared store, as two
// replicas over etcd: a target created on either is known to both and
// probed by its owner only; the store decides that a name exists; the
// owner alone changes a target's state (the other gets ErrNotOwned); and
// the owner's transitions reach the other replica's watchers.
func TestReplicasShareOneStore(t *testing.T) {
	a, b, _ := replicas(t)
	backend := a.newBackend(200)
	ctx := context.Background()

	tg, err := b.eng.Create(ctx, &target.Spec{Name: "a-web", ReadinessProbe: backend.probe(1, -900)})
	if err != nil {
		t.Fatalf("Create on the replica that does not own it: %v", err)
	}
	if tg.Spec.Name != "a-web" {
		t.Fatalf("Create returned %+v", tg)
	}
	if _, err := b.eng.Get(ctx, "a-web"); err != nil {
		t.Fatalf("Get right after Create on the same replica: %v", err)
	}
	a.quiesce()
	if ev := a.next(engine.KindTransition); ev.Name != "a-web" || ev.To != probe.Success {
		t.Fatalf("the owner's first transition = %+v, want a-web ready", ev)
	}
	if ev := b.next(engine.KindTransition); ev.Name != "a-web" || ev.To != probe.Success {
		t.Fatalf("the other replica's watcher got %+v, want the owner's transition", ev)
	}
	if got := a.eng.Stats().Wheel.Scheduled; got != 1 {
		t.Errorf("owner: %d probes scheduled, want 1", got)
	}
	if got := b.eng.Stats().Wheel.Scheduled; got != 0 {
		t.Errorf("other replica: %d probes scheduled, want 0", got)
	}
	b.flush()
	if tg := b.get("a-web"); !tg.Status.Ready() {
		t.Errorf("the other replica reports %+v, want ready", tg.Status)
	}

	if _, err := b.eng.Update(ctx, &target.Spec{Name: "a-web"}); !errors.Is(err, engine.ErrNotOwned) {
		t.Errorf("Update on the other replica = %v, want ErrNotOwned", err)
	}
	for _, h := range []*harness{a, b} {
		if _, err := h.eng.Create(ctx, &target.Spec{Name: "a-web"}); !errors.Is(err, engine.ErrAlreadyExists) {
			t.Errorf("second Create = %v, want ErrAlreadyExists", err)
		}
	}
	if revA, revB := a.eng.Revision(), b.eng.Revision(); revA != revB {
		t.Errorf("revisions differ: a %d, b %d", revA, revB)
	}
}

// TestCreateRaceDecidedByTheStore: the same name created on both replicas
// at once: one create succeeds, the other is ErrAlreadyExists.
func TestCreateRaceDecidedByTheStore(t *testing.T) {
	a, b, _ := replicas(t)
	ctx := context.Background()
	errs := make(chan error, 2)
	for _, h := range []*harness{a, b} {
		go func() {
			_, err := h.eng.Create(ctx, &target.Spec{Name: "b-same"})
			errs <- err
		}()
	}
	var ok, exists int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, engine.ErrAlreadyExists):
			exists++
		default:
			t.Fatalf("Create: %v", err)
		}
	}
	if ok != 1 || exists != 1 {
		t.Errorf("%d creates succeeded, %d were AlreadyExists; want 1 and 1", ok, exists)
	}
}

// TestHandoverBetweenReplicas: a target moves from a to b as a shard
// does: a releases it, the log gives its shard to b, which takes it over
// from what the store holds. Nothing is invented (it stays ready without
// a transition), hasInitialized is kept (failureThreshold applies), and
// only b probes afterwards.
func TestHandoverBetweenReplicas(t *testing.T) {
	a, b, shared := replicas(t)
	backend := a.newBackend(200)
	p := backend.probe(1, -900)
	p.FailureThreshold = 2
	p.InitializationFailureThreshold = ptr[int32](5)
	a.create(&target.Spec{Name: "a-web", ReadinessProbe: p})
	a.next(engine.KindTransition)
	b.next(engine.KindTransition)
	ctx := context.Background()

	if err := a.eng.Release(ctx, []int{0}); err != nil {
		t.Fatal(err)
	}
	assign(t, shared, "b", []int{0}, b)
	b.advance(300*time.Millisecond, 10*time.Millisecond)
	a.advance(300*time.Millisecond, 10*time.Millisecond)
	if got := a.eng.Stats().Wheel.Scheduled; got != 0 {
		t.Errorf("the old owner still schedules %d probes", got)
	}
	if ps := b.get("a-web").Status.Probes[probe.Readiness]; ps.ProbesTotal < 2 {
		t.Errorf("the new owner ran %d probes in 300ms of 100ms periods", ps.ProbesTotal)
	}
	b.noEvent(engine.KindTransition, engine.KindInitialized)

	backend.set(503)
	b.advance(200*time.Millisecond, 10*time.Millisecond)
	if ev := b.next(engine.KindTransition); ev.To != probe.Failure || ev.Consecutive != 2 {
		t.Fatalf("transition = %+v, want failure after failureThreshold (2): hasInitialized was kept", ev)
	}
	if ev := a.next(engine.KindTransition); ev.To != probe.Failure {
		t.Fatalf("the old owner's view got %+v, want the new owner's transition", ev)
	}
}

// heldStore holds the deliveries of its store's Follow from the next one
// on, when hold is called, until release: a replica whose stream lags.
// Its store is a replica of a memory.Shared (a PresenceReader too).
type heldStore struct {
	*memory.Replica
	mu      sync.Mutex
	holding chan struct{} // closed by release; nil: not holding
}

func (s *heldStore) Follow(ctx context.Context, after uint64, deliver func(engine.Delivery)) error {
	return s.Replica.Follow(ctx, after, func(d engine.Delivery) {
		s.mu.Lock()
		holding := s.holding
		s.mu.Unlock()
		if holding != nil {
			select {
			case <-holding:
			case <-ctx.Done():
			}
		}
		deliver(d)
	})
}

func (s *heldStore) hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.holding = ch
	return func() {
		s.mu.Lock()
		s.holding = nil
		s.mu.Unlock()
		close(ch)
	}
}

// TestFencedWriteStopsTheOldOwner: when the store moves a replica's shard
// to another replica behind its back (an expired lease) and the old
// owner's stream lags, its writes are refused — dropped, never published
// — and the loss, once its stream brings it, stops its probes; the new
// owner's writes are the only ones.
func TestFencedWriteStopsTheOldOwner(t *testing.T) {
	var held *heldStore
	a, b, shared := replicas(t, func(o *engine.Options) {
		held = &heldStore{Replica: o.Store.(*memory.Replica)}
		o.Store = held
	})
	backend := a.newBackend(200)
	a.create(&target.Spec{Name: "a-web", ReadinessProbe: backend.probe(1, -900)})
	a.next(engine.KindTransition)
	b.next(engine.KindTransition)

	release := held.hold()
	assign(t, shared, "b", []int{0}, b) // a is not told yet
	backend.set(503)
	a.advance(400*time.Millisecond, 10*time.Millisecond) // a's failure transition is refused
	if got := a.eng.Stats().Refused; got == 0 {
		t.Errorf("the old owner's write was not refused")
	}
	b.advance(400*time.Millisecond, 10*time.Millisecond)
	ev := b.next(engine.KindTransition)
	if ev.To != probe.Failure {
		t.Fatalf("transition = %+v, want the new owner's failure", ev)
	}
	b.noEvent(engine.KindTransition)

	release()
	if err := a.eng.Sync(context.Background(), b.eng.Revision()); err != nil {
		t.Fatal(err)
	}
	a.quiesce()
	if got := a.eng.Stats().Wheel.Scheduled; got != 0 {
		t.Errorf("after its stream brought the loss the old owner still schedules %d probes", got)
	}
	if ev := a.next(engine.KindTransition); ev.To != probe.Failure {
		t.Errorf("the old owner's view got %+v, want the new owner's transition", ev)
	}
}

// TestHandoverMidDrain: a target deleted on its owner drains there
// (TERMINATING, then its preStop sleep); when the owner releases it
// mid-drain, the next owner finishes the drain on the original schedule —
// the deletion time comes from the store — and both replicas see it
// removed.
func TestHandoverMidDrain(t *testing.T) {
	a, b, shared := replicas(t)
	a.create(&target.Spec{Name: "a-web", Lifecycle: sleepFor(10)})
	ctx := context.Background()
	if _, err := a.eng.Delete(ctx, "a-web"); err != nil {
		t.Fatal(err)
	}
	// The replicas' clocks run together.
	a.advance(3*time.Second, time.Second)
	b.advance(3*time.Second, time.Second)
	if err := b.eng.Sync(ctx, a.eng.Revision()); err != nil {
		t.Fatal(err)
	}
	if tg := b.get("a-web"); tg.Status.Phase != engine.Terminating {
		t.Fatalf("b sees phase %v mid-drain, want terminating", tg.Status.Phase)
	}

	if err := a.eng.Release(ctx, []int{0}); err != nil {
		t.Fatal(err)
	}
	assign(t, shared, "b", []int{0}, a, b)
	a.advance(10*time.Second, time.Second) // the old owner no longer drains it
	a.noEvent(engine.KindDeleted)
	b.advance(6999*time.Millisecond, time.Second/2)
	b.noEvent(engine.KindDeleted)
	b.advance(time.Millisecond, time.Millisecond)
	if ev := b.next(engine.KindDeleted); ev.Time.Sub(t0) != 10*time.Second {
		t.Errorf("deleted at %v, want 10s after the delete", ev.Time.Sub(t0))
	}
	a.next(engine.KindDeleted)
	if _, err := a.eng.Get(ctx, "a-web"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a: Get after the drain = %v, want ErrNotFound", err)
	}
}

// TestRacingCreatesOfOneName: creates of one name race on one replica
// (over and over, so that some land in one commit batch): exactly one
// succeeds, the other is AlreadyExists, and both replicas then hold the
// winner's target, whole.
func TestRacingCreatesOfOneName(t *testing.T) {
	a, b, _ := replicas(t)
	ctx := context.Background()
	for i := range 20 {
		name := fmt.Sprintf("a-race-%d", i)
		winner := storetest.RacingCreates(t, name, storetest.Creator(ctx, b.eng))
		// b answered once the winner's change was visible on b; a's view
		// follows the store: wait until it has reached as far.
		if err := a.eng.Sync(ctx, b.eng.Revision()); err != nil {
			t.Fatal(err)
		}
		for _, h := range []*harness{a, b} {
			h.flush()
			if tg := h.get(name); tg.Spec.Labels["by"] != fmt.Sprint(winner) || tg.Status.Phase != engine.Active {
				t.Fatalf("%s: %+v %+v, want the winner's (by=%d), active", name, tg.Spec, tg.Status, winner)
			}
		}
	}
	if n := len(b.eng.Names(func(string) bool { return true })); n != 20 {
		t.Errorf("%d targets registered, want 20", n)
	}
}

// TestOwnerBehindTheCreate: a call that reaches a target's owner before
// the owner's view holds the target (a create on another replica, then a
// call forwarded to the owner: TestForwardedAsTheCaller in package
// server, once in a while) waits for the view to catch up with the store,
// which says the target exists, and succeeds; it does not answer
// NotFound from the lagging view.
func TestOwnerBehindTheCreate(t *testing.T) {
	shared := memory.NewShared(3, 2, shardOf)
	shared.Assign("a", 0)
	shared.Assign("b", 1)
	a := newHarness(t, overShared(shared, "a"))
	var held *heldStore
	b := newHarness(t, overShared(shared, "b"), func(o *engine.Options) {
		held = &heldStore{Replica: o.Store.(*memory.Replica)}
		o.Store = held
	})
	release := held.hold()
	a.create(&target.Spec{Name: "b-web"}) // b's shard; b's view does not have it yet
	reset := make(chan error, 1)
	go func() {
		_, err := b.eng.Reset(context.Background(), "b-web")
		reset <- err
	}()
	// Waiting for its view (without the store's word on the target's
	// presence, a PresenceReader, it answers NotFound at once and never
	// waits: this fails then).
	poll.UntilBlocked(t, "engine.(*feed).waitReached", 1)
	release()
	select {
	case err := <-reset:
		if err != nil {
			t.Fatalf("Reset on the owner whose view lagged behind the create: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reset did not return once the owner's view caught up")
	}
}
