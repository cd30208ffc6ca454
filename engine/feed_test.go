package engine

import (
	"context"
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
