package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
)

// TestNamespaceAndVisibleFilters: List and Watch (snapshot, replay, live)
// return only the targets of ListOptions/WatchOptions.Namespace and those
// Visible accepts. Names of a namespace sort together, and a namespace
// is not a prefix match on the name ("team-a" does not hold "team-ab/x").
func TestNamespaceAndVisibleFilters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, n := range []string{"solo", "team-a/web", "team-a/db.eu", "team-ab/web", "team-b/web"} {
		h.create(&target.Spec{Name: n})
	}
	notDB := func(name string) bool { return !strings.Contains(name, "db") }
	cases := []struct {
		name      string
		namespace string
		visible   func(string) bool
		want      []string
	}{
		{name: "all", want: []string{"solo", "team-a/db.eu", "team-a/web", "team-ab/web", "team-b/web"}},
		{name: "namespace", namespace: "team-a", want: []string{"team-a/db.eu", "team-a/web"}},
		{name: "namespace and visible", namespace: "team-a", visible: notDB, want: []string{"team-a/web"}},
		{name: "visible", visible: notDB, want: []string{"solo", "team-a/web", "team-ab/web", "team-b/web"}},
		{name: "empty namespace", namespace: "team-c", want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, _, err := h.eng.List(ctx, engine.ListOptions{Limit: 100, Namespace: c.namespace, Visible: c.visible})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tg := range ts {
				got = append(got, tg.Spec.Name)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("List = %v, want %v", got, c.want)
			}
			for _, since := range []uint64{0, 1} {
				w, err := h.eng.Watch(ctx, engine.WatchOptions{Since: since, Namespace: c.namespace, Visible: c.visible})
				if err != nil {
					t.Fatal(err)
				}
				got = nil
				// A replay whose events are all filtered out returns no
				// batch: wait for one a short while.
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				for {
					b, err := w.Next(wctx)
					if since > 0 && errors.Is(err, context.DeadlineExceeded) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					for _, ev := range b.Events {
						got = append(got, ev.Name)
					}
					if b.SnapshotComplete || (since > 0 && b.Revision >= h.eng.Revision()) {
						break
					}
				}
				cancel()
				w.Close()
				slices.Sort(got)
				if !slices.Equal(got, c.want) {
					t.Errorf("Watch since %d = %v, want %v", since, got, c.want)
				}
			}
		})
	}
}
