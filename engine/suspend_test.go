package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/probed/probed/engine"
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
