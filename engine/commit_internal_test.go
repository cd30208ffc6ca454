package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// limitedStore is a stubStore whose Commit takes at most 3 changes and 10
// bytes (each change weighs its name's length), recording each batch.
type limitedStore struct {
	stubStore
	mu      sync.Mutex
	batches [][]string // guarded by mu
}

func (*limitedStore) BatchLimits() (int, int)   { return 3, 10 }
func (*limitedStore) ChangeBytes(c *Change) int { return len(c.Name) }

func (s *limitedStore) Commit(ctx context.Context, changes []*Change) error {
	var names []string
	for _, c := range changes {
		names = append(names, c.Name)
	}
	s.mu.Lock()
	s.batches = append(s.batches, names)
	s.mu.Unlock()
	return s.stubStore.Commit(ctx, changes)
}

// followedCommitter returns a committer over store whose feed follows
// the store, as the engine's follow loop makes it (the committer only
// writes; its waiters are told once the feed has published their batch).
func followedCommitter(t *testing.T, store *limitedStore) *committer {
	f := newFeed(100, 0)
	c := newCommitter(store, f, clockwork.NewFakeClock(), func([]*Change, time.Duration) {})
	store.log.Start()
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() {
		followed <- store.Follow(ctx, 0, func(d Delivery) {
			f.publish(d.Changes)
			f.reach(d.Pos)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-followed; err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestCommitterRespectsBatchLimits: batches stay within the store's limits
// and never split one submission, except a submission over the limits by
// itself, which is committed alone.
func TestCommitterRespectsBatchLimits(t *testing.T) {
	store := &limitedStore{}
	c := followedCommitter(t, store)
	change := func(name string) *Change {
		return &Change{Name: name, Target: &Target{Spec: nameOnly(name)}}
	}
	units := [][]string{{"a", "a"}, {"b"}, {"c", "c"}, {"dddddddddddd"}, {"e"}, {"f", "f", "f", "f"}, {"g"}}
	var dones []<-chan error
	for _, u := range units {
		var cs []*Change
		for _, n := range u {
			cs = append(cs, change(n))
		}
		done, err := c.submit(cs, true)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.run(ctx) }()
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"a", "a", "b"}, {"c", "c"}, {"dddddddddddd"}, {"e"}, {"f", "f", "f", "f"}, {"g"}}
	if len(store.batches) != len(want) {
		t.Fatalf("batches %v, want %v", store.batches, want)
	}
	for i := range want {
		if len(store.batches[i]) != len(want[i]) {
			t.Errorf("batch %d = %v, want %v", i, store.batches[i], want[i])
		}
	}
}
