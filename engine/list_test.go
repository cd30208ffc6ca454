package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// TestListPageCostsThePageNotTheRegistry: a page of List is copied from
// the registry's name order, so what it allocates depends on the page's
// size, not on how many targets are registered. The same page (the 100
// names after one in the middle, and the first 100) is listed from a
// registry of 500 and of 5,000 targets; the allocations per call must not
// grow with the registry (a List that built or sorted the whole list
// would allocate 10× more at 5,000).
func TestListPageCostsThePageNotTheRegistry(t *testing.T) { // not parallel: AllocsPerRun
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
		first = testing.AllocsPerRun(20, func() { list(engine.ListOptions{Limit: page}) })
		middle = testing.AllocsPerRun(20, func() {
			list(engine.ListOptions{After: after, Limit: page, Selector: map[string]string{"app": "web"}})
		})
		return first, middle
	}
	small1, small2 := allocs(t, 500)
	large1, large2 := allocs(t, 5000)
	t.Logf("allocations per page of %d: first page %.0f (500 targets) vs %.0f (5,000); a middle page %.0f vs %.0f",
		page, small1, large1, small2, large2)
	// A few allocations of slack: the page slice grows by appends either way.
	for _, c := range []struct {
		name         string
		small, large float64
	}{{"first page", small1, large1}, {"middle page", small2, large2}} {
		if c.large > c.small+4 {
			t.Errorf("%s: %.0f allocations with 5,000 targets, %.0f with 500: a page costs more with more targets", c.name, c.large, c.small)
		}
		if c.small < page { // each target of the page is copied (withLive)
			t.Errorf("%s: %.0f allocations for %d targets: the measurement does not see the page's copies", c.name, c.small, page)
		}
	}
}
