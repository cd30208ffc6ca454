package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// A wait given up (its context ended) leaves no callback behind: a view
// stalled for long must not collect every abandoned wait. The waits still
// registered run when the feed reaches their revision, in revision order.
func TestAbandonedWaitsLeaveNothing(t *testing.T) {
	tests := []struct {
		name string
		revs []uint64 // the revisions waited for; each even index is given up
	}{
		{name: "one revision", revs: []uint64{5, 5, 5, 5, 5, 5}},
		{name: "several revisions", revs: []uint64{9, 3, 7, 3, 9, 5, 3, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFeed(16, 1<<20)
			var ran []uint64
			for i, rev := range tt.revs {
				if i%2 == 0 {
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if err := f.waitReached(ctx, rev); err == nil {
						t.Fatalf("wait for %d with an ended context: nil error", rev)
					}
					continue
				}
				f.whenReached(rev, func() { ran = append(ran, rev) })
			}
			if got, want := len(f.reached), len(tt.revs)/2; got != want {
				t.Fatalf("%d callbacks registered, want %d (the waits not given up)", got, want)
			}
			f.reach(100)
			if len(f.reached) != 0 {
				t.Errorf("%d callbacks left after the feed reached every revision", len(f.reached))
			}
			if len(ran) != len(tt.revs)/2 {
				t.Fatalf("ran %v, want one call per wait kept", ran)
			}
			for i := 1; i < len(ran); i++ {
				if ran[i] < ran[i-1] {
					t.Errorf("ran %v: not in revision order", ran)
				}
			}
		})
	}
}

// A watcher's batch holds whole publishes: events a publish has queued
// are not taken until it ends, so a consumer never sees part of one
// delivery (a deleted target's readiness FAILURE without its
// TERMINATING).
func TestAWatcherTakesWholePublishes(t *testing.T) {
	f := newFeed(16, 1<<20)
	w, err := f.watch(WatchOptions{Since: 1}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(ctx); err == nil {
		t.Fatal("Next of a new watcher returned events: want it to wait")
	}
	events := []Event{
		{Name: "a", Kind: KindTransition, Revision: 1},
		{Name: "a", Kind: KindTerminating, Revision: 2},
	}
	f.mu.Lock()
	for i := range events {
		if !f.pushLocked(w, &events[i], 10) {
			t.Fatalf("push of event %d refused", i)
		}
		w.mu.Lock()
		b, ok := w.takeLocked()
		w.mu.Unlock()
		if ok {
			t.Fatalf("took %d events while the publish was at event %d", len(b.Events), i)
		}
	}
	f.advanceLocked(w, 2)
	f.mu.Unlock()
	b, err := w.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 2 || b.Revision != 2 {
		t.Fatalf("batch of %d events at %d, want both at 2", len(b.Events), b.Revision)
	}
}

// A delivery of half the watcher's buffer or more is taken in parts as it
// is queued (an apply of thousands of targets in one transaction), so its
// size alone does not end the watcher as too slow.
func TestAWatcherTakesALargeDeliveryInParts(t *testing.T) {
	f := newFeed(16, 1<<20)
	w, err := f.watch(WatchOptions{Since: 1}, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Next(ctx); err == nil {
		t.Fatal("Next of a new watcher returned events: want it to wait")
	}
	f.mu.Lock()
	defer f.mu.Unlock() // the publish never ends in this test
	for i := range 2 {
		ev := Event{Name: "a", Kind: KindTransition, Revision: uint64(i + 1)}
		if !f.pushLocked(w, &ev, 10) {
			t.Fatalf("push of event %d refused", i)
		}
	}
	w.mu.Lock()
	b, ok := w.takeLocked()
	w.mu.Unlock()
	if !ok || len(b.Events) != 2 {
		t.Fatalf("took %d events (ok %v) of a publish that filled half the buffer of 4, want both", len(b.Events), ok)
	}
}

// TestACatchUpTakesWholeDeliveries: a watcher that catches up from
// history gets its batches cut between deliveries, as a live watcher
// does: two publishes of 600 events each are two batches of 600, not one
// of 1,000 (maxBatch) and one of 200, which would split the second
// publish (a deleted target's FAILURE without its TERMINATING, for xDS).
func TestACatchUpTakesWholeDeliveries(t *testing.T) {
	f := newFeed(5000, 0)
	rev := uint64(0)
	for d := range 2 {
		var changes []*Change
		for i := range 600 {
			rev++
			name := fmt.Sprintf("t-%d-%d", d, i)
			tg := &Target{Spec: nameOnly(name), Status: Status{Phase: Active, Revision: rev}}
			changes = append(changes, &Change{Name: name, Target: tg, Event: Event{Revision: rev, Name: name, Kind: KindCreated, Target: tg}})
		}
		f.publish(changes)
	}
	w, err := f.watch(WatchOptions{Since: 1}, 5000, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var sizes []int
	for total := 0; total < 1200; {
		b, err := w.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b.Events))
		total += len(b.Events)
	}
	if !slices.Equal(sizes, []int{600, 600}) {
		t.Fatalf("caught up in batches of %v, want [600 600]", sizes)
	}
}
