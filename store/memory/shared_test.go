package memory_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
	"github.com/probed/probed/store/memory"
	"github.com/probed/probed/store/storetest"
)

// TestSharedCreateAfterDelete: a name created again right after its
// delete — in the next transaction, or in the same one — is a new target
// in memory.Shared as in etcd, which it stands in for: the create is
// accepted, its revision is above the delete's, Load has the new target
// only, and Follow delivers every change in order, each CREATED with its
// own target (the old one's events are not confused with the new one's).
// A create of a name that exists, or twice in one transaction, is
// refused in both.
func TestSharedCreateAfterDelete(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) engine.SharedStore{
		"memory": func(*testing.T) engine.SharedStore {
			s := memory.NewShared(3, 1, nil)
			s.Assign("r1", 0)
			return s.Replica("r1")
		},
		"etcd": func(t *testing.T) engine.SharedStore {
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
			createAfterDelete(t, open(t))
		})
	}
}

func createAfterDelete(t *testing.T, s engine.SharedStore) {
	ctx := t.Context()
	at := func(sec int) time.Time { return storetest.Epoch.Add(time.Duration(sec) * time.Second) }
	create := func(version string, sec int) *engine.Change {
		spec := storetest.BareSpec("x")
		spec.Labels = map[string]string{"v": version}
		c := storetest.Create(spec, at(sec))
		c.Create = true
		return c
	}
	remove := func(prev *engine.Change, sec int) *engine.Change {
		c := storetest.Delete("x", at(sec))
		c.Target = prev.Target // as the engine makes it
		return c
	}
	commit := func(changes ...*engine.Change) {
		t.Helper()
		if err := s.Commit(ctx, changes); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	v1 := create("1", 1)
	commit(v1)
	d1 := remove(v1, 2)
	commit(d1)
	v2 := create("2", 3) // the next transaction
	commit(v2)
	d2, v3 := remove(v2, 4), create("3", 5) // one transaction
	commit(d2, v3)
	all := []*engine.Change{v1, d1, v2, d2, v3}
	for i := 1; i < len(all); i++ {
		if all[i].Event.Revision <= all[i-1].Event.Revision {
			t.Fatalf("change %d at revision %d, after %d: want increasing", i, all[i].Event.Revision, all[i-1].Event.Revision)
		}
	}

	for _, batch := range [][]*engine.Change{{create("4", 6)}, {remove(v3, 6), create("5", 6), create("6", 6)}} {
		var conflict *engine.ConflictError
		err := s.Commit(ctx, batch)
		if !errors.As(err, &conflict) || !errors.Is(conflict.Refused["x"], engine.ErrAlreadyExists) {
			t.Fatalf("Commit of %d changes creating x again: %v, want x refused as AlreadyExists", len(batch), err)
		}
	}

	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 1 || st.Targets[0].Spec.Labels["v"] != "3" || !st.Targets[0].Status.CreateTime.Equal(at(5)) {
		t.Fatalf("Load: %+v, want x v3 created at %v alone", st.Targets, at(5))
	}

	// Follow from the start delivers the five changes in order.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu  sync.Mutex
		got []*engine.Change
	)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, 0, func(d engine.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d.Changes...)
			if len(got) >= len(all) {
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
		t.Fatal("Follow did not deliver five changes within 20s")
	}
	mu.Lock()
	defer mu.Unlock()
	var seq []string
	for i, c := range got {
		s := strings.ToLower(c.Event.Kind.String())
		if c.Event.Kind == engine.KindCreated {
			if !c.Create || c.Target == nil || c.Event.Target != c.Target {
				t.Errorf("change %d: %+v, want a create carrying its target", i, c)
			}
			s += "(v" + c.Target.Spec.Labels["v"] + ")"
		}
		if c.Event.Revision != all[min(i, len(all)-1)].Event.Revision {
			t.Errorf("change %d at revision %d, want %d", i, c.Event.Revision, all[min(i, len(all)-1)].Event.Revision)
		}
		seq = append(seq, s)
	}
	if want := []string{"created(v1)", "deleted", "created(v2)", "deleted", "created(v3)"}; !slices.Equal(seq, want) {
		t.Errorf("Follow delivered %v, want %v", seq, want)
	}
}
