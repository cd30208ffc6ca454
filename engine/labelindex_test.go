package engine

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/google/btree"

	"github.com/probed/probed/engine/target"
)

func labelled(name string, labels map[string]string) *Target {
	return &Target{Spec: &target.Spec{Name: name, Labels: labels}}
}

func targetNames(ts []*Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Spec.Name
	}
	return out
}

// TestListByLabelIndex: a list with a label selector returns, in name
// order and by pages, the targets that carry every label of it, as the
// labels of targets are added, changed and removed, and the targets
// deleted; the index holds no label that no target has.
func TestListByLabelIndex(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	f.putLocked(newRecord(labelled("a", map[string]string{"app": "web", "env": "prod"})))
	f.putLocked(newRecord(labelled("b", map[string]string{"app": "web", "env": "dev"})))
	f.putLocked(newRecord(labelled("c", map[string]string{"app": "db", "env": "prod"})))
	f.putLocked(newRecord(labelled("d", map[string]string{"app": "web", "env": "prod"})))
	f.putLocked(newRecord(labelled("e", nil)))
	f.putLocked(newRecord(labelled("b", map[string]string{"app": "web", "env": "prod"}))) // env changed
	f.putLocked(newRecord(labelled("d", map[string]string{"env": "prod"})))               // app removed
	f.putLocked(newRecord(labelled("f", map[string]string{"app": "web", "env": "prod"})))
	f.removeLocked("f")
	f.removeLocked("missing")
	tests := []struct {
		name     string
		selector map[string]string
		after    string
		limit    int
		want     []string
		more     bool
	}{
		{name: "no selector", limit: 10, want: []string{"a", "b", "c", "d", "e"}},
		{name: "one label", selector: map[string]string{"app": "web"}, limit: 10, want: []string{"a", "b"}},
		{name: "two labels", selector: map[string]string{"app": "web", "env": "prod"}, limit: 10, want: []string{"a", "b"}},
		{name: "changed label", selector: map[string]string{"env": "dev"}, limit: 10, want: []string{}},
		{name: "a page", selector: map[string]string{"env": "prod"}, limit: 2, want: []string{"a", "b"}, more: true},
		{name: "the next page", selector: map[string]string{"env": "prod"}, after: "b", limit: 2, want: []string{"c", "d"}},
		{name: "after a name without the label", selector: map[string]string{"app": "web"}, after: "aa", limit: 10, want: []string{"b"}},
		{name: "a label nobody has", selector: map[string]string{"app": "web", "zone": "x"}, limit: 10, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, more := f.list(ListOptions{After: tt.after, Limit: tt.limit, Selector: tt.selector})
			if !slices.Equal(targetNames(got), tt.want) || more != tt.more {
				t.Errorf("list(%q, %d, %v) = %v, more %v; want %v, more %v", tt.after, tt.limit, tt.selector, targetNames(got), more, tt.want, tt.more)
			}
		})
	}
	// A selector's list reads the index, not the whole view.
	f.view = btree.NewG(32, byName)
	if got, _ := f.list(ListOptions{Limit: 10, Selector: map[string]string{"app": "db"}}); !slices.Equal(targetNames(got), []string{"c"}) {
		t.Errorf("list of app=db without the view = %v; want [c] from the label index", targetNames(got))
	}
	var held []string
	for l, tr := range f.labels.byLabel {
		held = append(held, fmt.Sprintf("%s=%s:%d", l.key, l.value, tr.Len()))
	}
	slices.Sort(held)
	if want := []string{"app=db:1", "app=web:2", "env=prod:4"}; !slices.Equal(held, want) {
		t.Errorf("index holds %v; want %v", held, want)
	}
}

// TestSharedLabels: a target's labels equal to a published target's are
// that target's map; other sets stay their own.
func TestSharedLabels(t *testing.T) {
	t.Parallel()
	f := newFeed(10, 0)
	web := map[string]string{"app": "web", "env": "prod"}
	f.putLocked(newRecord(labelled("a", web)))
	f.putLocked(newRecord(labelled("b", map[string]string{"app": "web"})))
	f.putLocked(newRecord(labelled("c", map[string]string{"app": "web", "env": "prod"})))
	tests := []struct {
		name   string
		labels map[string]string
		shared bool
	}{
		{name: "an equal set", labels: map[string]string{"env": "prod", "app": "web"}, shared: true},
		{name: "a subset held by another target", labels: map[string]string{"env": "prod"}},
		{name: "a superset", labels: map[string]string{"app": "web", "env": "prod", "zone": "a"}},
		{name: "a label nobody has", labels: map[string]string{"app": "db"}},
		{name: "none", labels: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.sharedLabels(tt.labels)
			if !maps.Equal(got, tt.labels) {
				t.Fatalf("sharedLabels(%v) = %v", tt.labels, got)
			}
			same := func(a, b map[string]string) bool {
				return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
			}
			if shared := len(got) > 0 && !same(got, tt.labels); shared != tt.shared {
				t.Errorf("sharedLabels(%v) shared a published map: %v; want %v", tt.labels, shared, tt.shared)
			}
			if tt.shared {
				if r, _ := f.view.Get(named("c")); !same(got, web) && !same(got, r.spec.Labels) {
					t.Errorf("shared a map that is not a published target's")
				}
			}
		})
	}
}
