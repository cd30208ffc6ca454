package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// TestSuspendEndsWatchersAndRefusesReads: Suspend ends a live watcher
// with ErrSuspended naming the cause, and refuses Get, List and Watch;
// after Resume they answer again.
func TestSuspendEndsWatchersAndRefusesReads(t *testing.T) {
	h := newHarness(t)
	h.create(&target.Spec{Name: "web"})
	ctx := context.Background()
	w, err := h.eng.Watch(ctx, engine.WatchOptions{Since: h.eng.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if b, err := w.Next(ctx); err != nil || len(b.Events) != 1 {
		t.Fatalf("Next before Suspend = %+v, %v; want the create", b, err)
	}

	h.eng.Suspend(errors.New("lease lost"))
	unavailable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrSuspended) || !strings.Contains(err.Error(), "lease lost") {
			t.Errorf("%s while suspended: %v, want ErrSuspended naming the cause", what, err)
		}
	}
	_, err = w.Next(ctx)
	unavailable("the live watcher's Next", err)
	_, err = h.eng.Get(ctx, "web")
	unavailable("Get", err)
	_, _, err = h.eng.List(ctx, engine.ListOptions{})
	unavailable("List", err)
	_, err = h.eng.Watch(ctx, engine.WatchOptions{Since: 1})
	unavailable("Watch", err)

	h.eng.Resume()
	if _, err := h.eng.Get(ctx, "web"); err != nil {
		t.Errorf("Get after Resume: %v", err)
	}
	w2, err := h.eng.Watch(ctx, engine.WatchOptions{})
	if err != nil {
		t.Fatalf("Watch after Resume: %v", err)
	}
	w2.Close()
}

// TestWritesDoNotVouchForAbsenceUnvouched (issue 22, found by the chaos
// soak): a call that changes a target the view does not hold answers
// NotFound only while the view can be vouched for. While the lease is
// past its local deadline (MayProbe false: a replica woken from a pause,
// before its watchdog suspends it) or the view is suspended, Update,
// Reset, Trigger and Delete fail with ErrSuspended instead: the target
// may exist, created by another replica meanwhile, and a Delete answered
// NotFound would leave it in place.
func TestWritesDoNotVouchForAbsenceUnvouched(t *testing.T) {
	var may atomic.Bool
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
				if err := do(); !errors.Is(err, tc.want) {
					t.Errorf("%s of a target the view does not hold: %v, want %v", call, err, tc.want)
				}
			}
		})
	}
}
