package engine

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestGroupIsOneUnitAndHoldsOthers: the changes of a group are written in
// one Commit, in one run, and a change submitted outside the group while
// it is open (a transition after an update of the group) is written after
// the group's, never before or between them.
func TestGroupIsOneUnitAndHoldsOthers(t *testing.T) {
	store := &limitedStore{}
	c := followedCommitter(t, store)
	change := func(name string) *Change {
		return &Change{Name: name, Target: &Target{Spec: nameOnly(name)}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	g := c.open()
	if _, err := g.submit([]*Change{change("a")}, true); err != nil {
		t.Fatal(err)
	}
	outside, err := c.submit([]*Change{change("x")}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.submit([]*Change{change("b"), change("c")}, false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-outside:
		t.Fatalf("a change submitted outside an open group was written before it (%v)", err)
	case <-time.After(50 * time.Millisecond): // the committer runs meanwhile
	}
	done := g.commit()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-outside; err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	var order []string
	for _, b := range store.batches {
		order = append(order, b...)
	}
	if !slices.Equal(order, []string{"a", "b", "c", "x"}) || !slices.Equal(store.batches[0], []string{"a", "b", "c"}) {
		t.Errorf("batches %v: want the group (a b c) in one, then x", store.batches)
	}
}
