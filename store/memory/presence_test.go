package memory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/memory"
	"github.com/probed/probed/store/storetest"
)

// presenceStore is a shared store that vouches for a NotFound.
type presenceStore interface {
	engine.SharedStore
	engine.PresenceReader
}

// TestSharedPresent: memory.Shared answers Present as the etcd store it
// stands in for does: a target that does not exist (yet, or any more) is
// absent; one that exists is present at a position Follow delivers, at
// or after the batch that created it. Without it, a replica of the tests'
// clusters whose view lags answered NotFound for a target another
// replica had created, where a replica over etcd waits for its view.
func TestSharedPresent(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) presenceStore{
		"memory": func(*testing.T) presenceStore { return memory.NewShared(3, 1, nil).Replica("") },
		"etcd": func(t *testing.T) presenceStore {
			s, err := etcd.Open(t.Context(), etcd.Options{Client: etcdtest.Start(t).Client(t), ReplicaID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			presentAfterWrites(t, open(t))
		})
	}
}

func presentAfterWrites(t *testing.T, s presenceStore) {
	ctx := t.Context()
	at := func(sec int) time.Time { return storetest.Epoch.Add(time.Duration(sec) * time.Second) }
	present := func(name string) (uint64, bool) {
		t.Helper()
		pos, ok, err := s.Present(ctx, name)
		if err != nil {
			t.Fatalf("Present(%s): %v", name, err)
		}
		return pos, ok
	}
	commit := func(changes ...*engine.Change) {
		t.Helper()
		if err := s.Commit(ctx, changes); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	if _, ok := present("x"); ok {
		t.Fatal("x present before it was created")
	}
	x := storetest.Create(storetest.BareSpec("x"), at(1))
	x.Create = true
	commit(x)
	commit(storetest.Transition(x.Target, probe.Readiness, probe.Success, 1, at(2)))
	y := storetest.Create(storetest.BareSpec("y"), at(3))
	y.Create = true
	commit(y)
	pos, ok := present("x")
	if !ok {
		t.Fatal("x absent after its create")
	}

	// The positions Follow delivers, and the one of x's create.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu              sync.Mutex
		created, latest uint64
		batches         int
	)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, 0, func(d engine.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range d.Changes {
				if c.Name == "x" && c.Create {
					created = d.Pos
				}
			}
			latest = d.Pos
			if batches++; batches == 3 {
				cancel()
			}
		})
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Follow did not deliver three batches within 20s")
	}
	mu.Lock()
	defer mu.Unlock()
	if created == 0 || pos < created || pos > latest {
		t.Errorf("x present at position %d; want one from its create's %d up to the latest delivered, %d", pos, created, latest)
	}

	commit(storetest.Delete("x", at(4)))
	if _, ok := present("x"); ok {
		t.Error("x present after its delete")
	}
	if _, ok := present("y"); !ok {
		t.Error("y absent")
	}
}
