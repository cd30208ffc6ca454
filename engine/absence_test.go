package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// TestNoNotFoundUnvouched (issue 22, found by the chaos soak): a call
// that changes or reads a target the view does not hold answers
// NotFound only while the view can be vouched for. While the lease is
// past its local deadline (MayProbe false: a replica woken from a pause,
// before its watchdog suspends it) or the view is suspended, Get, Update,
// Reset, Trigger and Delete fail with ErrSuspended instead: the target
// may exist, created by another replica meanwhile, and a Delete answered
// NotFound would leave it in place.
func TestNoNotFoundUnvouched(t *testing.T) {
	var may atomic.Bool
	may.Store(true) // the harness's watch opens from a vouched view
	h := newHarness(t, func(o *engine.Options) { o.MayProbe = may.Load })
	ctx := context.Background()
	calls := map[string]func() error{
		"Update": func() error { _, err := h.eng.Update(ctx, &target.Spec{Name: "absent"}); return err },
		"Reset":  func() error { _, err := h.eng.Reset(ctx, "absent"); return err },
		"Trigger": func() error {
			_, _, err := h.eng.Trigger(ctx, "absent", probe.Readiness)
			return err
		},
		"Delete": func() error { _, err := h.eng.Delete(ctx, "absent"); return err },
		"Get":    func() error { _, err := h.eng.Get(ctx, "absent"); return err },
	}
	for _, tc := range []struct {
		name    string
		lease   bool
		suspend bool
		want    error
	}{
		{"lease valid", true, false, engine.ErrNotFound},
		{"lease past its deadline", false, false, engine.ErrSuspended},
		{"suspended", true, true, engine.ErrSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			may.Store(tc.lease)
			if tc.suspend {
				h.eng.Suspend(errors.New("lease lost"))
				defer h.eng.Resume()
			}
			for call, do := range calls {
				err := do()
				if !errors.Is(err, tc.want) {
					t.Errorf("%s of a target the view does not hold: %v, want %v", call, err, tc.want)
				}
				// Found by the chaos soak: a suspended answer that also
				// said NotFound became a NotFound status, and a Delete of
				// a target that existed "succeeded" without deleting it.
				if !errors.Is(tc.want, engine.ErrNotFound) && errors.Is(err, engine.ErrNotFound) {
					t.Errorf("%s of a target the view does not hold: %v is also ErrNotFound, an answer this view cannot vouch for", call, err)
				}
			}
		})
	}
}

// TestNoAnswerFromAnUnvouchedView: Get, List and a new Watch (its
// snapshot) answer only from a view this replica can vouch for. While its lease is past its local deadline
// (MayProbe false) or it is suspended, a page of List would miss what
// other replicas created meanwhile, and Get would show a target another
// replica may have deleted: both fail with ErrSuspended, and never with
// an answer (ErrNotFound).
func TestNoAnswerFromAnUnvouchedView(t *testing.T) {
	var may atomic.Bool
	may.Store(true)
	h := newHarness(t, func(o *engine.Options) { o.MayProbe = may.Load })
	h.create(&target.Spec{Name: "present"})
	ctx := context.Background()
	calls := map[string]func() error{
		"Get": func() error { _, err := h.eng.Get(ctx, "present"); return err },
		"List": func() error {
			_, _, err := h.eng.List(ctx, engine.ListOptions{})
			return err
		},
		"ListEach": func() error {
			_, err := h.eng.ListEach(ctx, engine.ListOptions{}, func(*engine.Target) {})
			return err
		},
		"Watch": func() error {
			w, err := h.eng.Watch(ctx, engine.WatchOptions{})
			if err == nil {
				w.Close()
			}
			return err
		},
	}
	for _, tc := range []struct {
		name    string
		lease   bool
		suspend bool
		want    error // nil: the call answers
	}{
		{"lease valid", true, false, nil},
		{"lease past its deadline", false, false, engine.ErrSuspended},
		{"suspended", true, true, engine.ErrSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			may.Store(tc.lease)
			defer may.Store(true)
			if tc.suspend {
				h.eng.Suspend(errors.New("lease lost"))
				defer h.eng.Resume()
			}
			for call, do := range calls {
				err := do()
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Errorf("%s of a view whose lease is %v (suspended %v): %v, want %v", call, tc.lease, tc.suspend, err, tc.want)
				}
				if errors.Is(err, engine.ErrNotFound) {
					t.Errorf("%s: %v is an answer from a view that cannot vouch", call, err)
				}
			}
		})
	}
}
