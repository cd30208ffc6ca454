package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/storetest"
)

// followed records what one Follow delivered.
type followed struct {
	t         *testing.T
	mu        sync.Mutex
	positions []uint64
	changes   []*engine.Change
	delivered chan struct{} // signalled after each delivery
	cancel    context.CancelFunc
	done      chan error
}

// follow runs s.Follow(after) until the test ends (or stop).
func follow(t *testing.T, s *etcd.Store, after uint64) *followed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &followed{t: t, delivered: make(chan struct{}, 1), cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- s.Follow(ctx, after, func(d engine.Delivery) {
			f.mu.Lock()
			f.positions = append(f.positions, d.Pos)
			f.changes = append(f.changes, d.Changes...)
			f.mu.Unlock()
			select {
			case f.delivered <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		if err := f.stop(); err != nil {
			t.Errorf("Follow = %v after its context ended, want nil", err)
		}
	})
	return f
}

// stop ends the Follow and returns its error (once).
func (f *followed) stop() error {
	f.cancel()
	select {
	case err := <-f.done:
		f.done <- nil // for a second stop
		return err
	case <-time.After(10 * time.Second):
		return errors.New("Follow did not return within 10s of its context's end")
	}
}

// reached returns the position delivered last.
func (f *followed) reached() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.positions) == 0 {
		return 0
	}
	return f.positions[len(f.positions)-1]
}

// waitFor waits until Follow delivered position pos or later.
func (f *followed) waitFor(pos uint64) {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	for f.reached() < pos {
		select {
		case <-f.delivered:
		case err := <-f.done:
			f.done <- err
			f.t.Fatalf("Follow ended before position %d: %v", pos, err)
		case <-deadline:
			f.t.Fatalf("Follow did not reach position %d within 30s (at %d)", pos, f.reached())
		}
	}
}

// events returns the events delivered.
func (f *followed) events() []engine.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]engine.Event, len(f.changes))
	for i, c := range f.changes {
		out[i] = c.Event
	}
	return out
}

// TestFollowTwoWriters: two replicas commit at once; each one's Follow
// delivers every transaction of both exactly once, in order, as a full
// replay (Load) has them, with the same revisions on both; positions only
// grow, and status-only changes come with their target's spec.
func TestFollowTwoWriters(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	b := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	fa := follow(t, a, load(t, a).Revision)
	fb := follow(t, b, load(t, b).Revision)

	const rounds = 15
	var wg sync.WaitGroup
	last := make([]uint64, 2)
	for i, s := range []*etcd.Store{a, b} {
		wg.Go(func() {
			for r := range rounds {
				cr := createWeb(fmt.Sprintf("%s-%02d", s.ReplicaID(), r))
				tr := transition(cr, 1)
				batch := []*engine.Change{cr, tr, transition(tr, 2)}
				if err := s.Commit(t.Context(), batch[:1+r%3]); err != nil {
					t.Errorf("replica %s: Commit: %v", s.ReplicaID(), err)
					return
				}
				last[i] = batch[r%3].Event.Revision
			}
		})
	}
	wg.Wait()
	end := max(last[0], last[1])
	fa.waitFor(end)
	fb.waitFor(end)

	replay := load(t, open(t, c.Client(t), etcd.Options{ReplicaID: "c"})).Events
	want := 0
	for r := range rounds {
		want += 2 * (1 + r%3) // both replicas
	}
	if len(replay) != want {
		t.Fatalf("the replay has %d events, want %d", len(replay), want)
	}
	for name, f := range map[string]*followed{"a": fa, "b": fb} {
		if diff := cmp.Diff(replay, f.events(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("replica %s's Follow differs from the replay (-replay +followed):\n%s", name, diff)
		}
		f.mu.Lock()
		for i := 1; i < len(f.positions); i++ {
			if f.positions[i] <= f.positions[i-1] {
				t.Errorf("replica %s: position %d delivered after %d", name, f.positions[i], f.positions[i-1])
			}
		}
		for _, ch := range f.changes {
			if ch.Target == nil || ch.Target.Spec == nil || ch.Target.Spec.Name != ch.Name || ch.Target.Spec.ReadinessProbe == nil {
				t.Errorf("replica %s: %s of %s delivered with target %+v, want its whole spec", name, ch.Event.Kind, ch.Name, ch.Target)
			}
			if ch.Target != nil && ch.Target.Status.Revision != ch.Event.Revision {
				t.Errorf("replica %s: %s %d delivered with status revision %d", name, ch.Event.Kind, ch.Event.Revision, ch.Target.Status.Revision)
			}
		}
		f.mu.Unlock()
	}
	for i := 1; i < len(replay); i++ {
		if replay[i].Revision <= replay[i-1].Revision {
			t.Errorf("revision %d after %d", replay[i].Revision, replay[i-1].Revision)
		}
	}
}

// TestFollowOtherRevisions: a revision without events under the prefix (a
// shard claim) is delivered as a position without changes; keys outside
// the prefix are not.
func TestFollowOtherRevisions(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	cli := c.Client(t)
	s := open(t, cli, etcd.Options{ReplicaID: "a"})
	f := follow(t, s, load(t, s).Revision)
	if _, err := cli.Put(t.Context(), "/elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(t.Context(), "/probed/shards/0007", "a")
	if err != nil {
		t.Fatal(err)
	}
	pos := uint64(resp.Header.Revision)<<10 | 1023
	f.waitFor(pos)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.changes) != 0 || f.positions[len(f.positions)-1] != pos {
		t.Errorf("delivered %d changes, positions %v; want none and %d last", len(f.changes), f.positions, pos)
	}
}

// TestFollowWithoutLoad: a Follow from a revision no Load read reads the
// specs there, and delivers status-only changes whole; a Follow from the
// middle of a transaction delivers its later changes only.
func TestFollowWithoutLoad(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	web := createWeb("web")
	tr := transition(web, 1)
	commit(t, a, web, tr)
	tr2 := transition(tr, 2)
	commit(t, a, tr2)

	b := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	f := follow(t, b, web.Event.Revision)
	f.waitFor(tr2.Event.Revision)
	got := f.events()
	if len(got) != 2 || got[0].Revision != tr.Event.Revision || got[1].Revision != tr2.Event.Revision {
		t.Fatalf("Follow from the create's revision delivered %v, want %d and %d", revisions(got), tr.Event.Revision, tr2.Event.Revision)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.changes {
		if diff := cmp.Diff(storetest.WebSpec("web"), ch.Target.Spec, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s %d: spec (-want +got):\n%s", ch.Event.Kind, ch.Event.Revision, diff)
		}
	}
}

// TestFollowEnds: Follow returns nil when its context ends and ErrClosed
// when the store closes.
func TestFollowEnds(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	s := open(t, c.Client(t), etcd.Options{ReplicaID: "a"})
	f := follow(t, s, load(t, s).Revision)
	if err := f.stop(); err != nil {
		t.Errorf("Follow after its context ended = %v, want nil", err)
	}
	s2 := open(t, c.Client(t), etcd.Options{ReplicaID: "b"})
	done := make(chan error, 1)
	go func() { done <- s2.Follow(context.Background(), 0, func(engine.Delivery) {}) }()
	_ = s2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, etcd.ErrClosed) {
			t.Errorf("Follow after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return within 10s of Close")
	}
}
