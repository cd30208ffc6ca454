package engine_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// TestListPageCostsThePageNotTheRegistry: a page of List is copied from
// the registry's name order, so what it allocates depends on the page's
// size, not on how many targets are registered. The same page (the 100
// names after one in the middle, and the first 100) is listed from a
// registry of 500 and of 5,000 targets; the bytes allocated per call must
// not grow with the registry (a List that built or sorted the whole list
// would allocate 10× more at 5,000). Bytes, not allocations: a page's
// targets are allocated together.
func TestListPageCostsThePageNotTheRegistry(t *testing.T) { // not parallel: the process's allocations are measured
	const page = 100
	allocs := func(t *testing.T, n int) (first, middle float64) {
		h := newHarness(t)
		ctx := context.Background()
		for i := range n {
			if _, err := h.eng.Create(ctx, &target.Spec{Name: fmt.Sprintf("t%06d", i), Labels: map[string]string{"app": "web"}}); err != nil {
				t.Fatal(err)
			}
		}
		after := fmt.Sprintf("t%06d", n/2)
		list := func(o engine.ListOptions) {
			ts, more, err := h.eng.List(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != page || !more {
				t.Fatalf("List(%+v) = %d targets, more %v; want %d and more", o, len(ts), more, page)
			}
			if o.After != "" && ts[0].Spec.Name != fmt.Sprintf("t%06d", n/2+1) {
				t.Fatalf("List after %s starts at %s", o.After, ts[0].Spec.Name)
			}
		}
		first = bytesPerRun(20, func() { list(engine.ListOptions{Limit: page}) })
		middle = bytesPerRun(20, func() {
			list(engine.ListOptions{After: after, Limit: page, Selector: map[string]string{"app": "web"}})
		})
		return first, middle
	}
	small1, small2 := allocs(t, 500)
	large1, large2 := allocs(t, 5000)
	t.Logf("bytes allocated per page of %d: first page %.0f (500 targets) vs %.0f (5,000); a middle page %.0f vs %.0f",
		page, small1, large1, small2, large2)
	// A few KiB of slack: the page slice grows by appends either way.
	for _, c := range []struct {
		name         string
		small, large float64
	}{{"first page", small1, large1}, {"middle page", small2, large2}} {
		if c.large > c.small+4<<10 {
			t.Errorf("%s: %.0f bytes with 5,000 targets, %.0f with 500: a page costs more with more targets", c.name, c.large, c.small)
		}
		if least := float64(page * unsafe.Sizeof(engine.Target{})); c.small < least { // each target of the page is copied
			t.Errorf("%s: %.0f bytes for %d targets, less than their Targets (%.0f): the measurement does not see the page's copies", c.name, c.small, page, least)
		}
	}
}

// bytesPerRun returns the bytes the process allocates per call of f, on
// average over runs calls (after one call to warm up).
func bytesPerRun(runs int, f func()) float64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// TestListEachAsList: ListEach lends, in turn, the targets List returns,
// the same page (with a selector, and after a name), and whether more
// follow.
func TestListEachAsList(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	for i := range 30 {
		labels := map[string]string{"app": "web"}
		if i%3 == 0 {
			labels["tier"] = "db"
		}
		if _, err := h.eng.Create(ctx, &target.Spec{Name: fmt.Sprintf("t%02d", i), Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []engine.ListOptions{
		{Limit: 10},
		{After: "t05", Limit: 10},
		{After: "t20", Limit: 50},
		{Limit: 4, Selector: map[string]string{"tier": "db"}},
	} {
		want, wantMore, err := h.eng.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var got []engine.Target
		var lent *engine.Target
		more, err := h.eng.ListEach(ctx, o, func(tg *engine.Target) {
			if lent != nil && tg != lent {
				t.Errorf("ListEach(%+v) lent a new Target, want the same one reused", o)
			}
			lent = tg
			got = append(got, *tg)
		})
		if err != nil {
			t.Fatal(err)
		}
		if more != wantMore || len(got) != len(want) {
			t.Fatalf("ListEach(%+v): %d targets, more %v; List: %d, more %v", o, len(got), more, len(want), wantMore)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], *want[i]) {
				t.Errorf("ListEach(%+v) target %d = %+v, List's %+v", o, i, got[i], *want[i])
			}
		}
	}
}
