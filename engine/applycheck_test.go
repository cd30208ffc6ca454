package engine_test

import (
	"testing"

	"github.com/probed/probed/engine/field"
	"github.com/probed/probed/engine/target"
)

// TestSetCheck: the targets of a set are checked one at a time, at their
// index in the set, as Apply checks the whole set: a bad owner or
// selector at once, then a name used twice, a target outside the
// selector, an invalid one.
func TestSetCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, errs := h.eng.CheckSet("Bad Owner", nil); len(errs) == 0 || errs[0].Field != "owner" {
		t.Errorf("CheckSet with a bad owner = %v, want an error at owner", errs)
	}
	c, errs := h.eng.CheckSet("o", map[string]string{"set": "a"})
	if len(errs) > 0 {
		t.Fatalf("CheckSet = %v", errs)
	}
	in := map[string]string{"set": "a"}
	tests := []struct {
		spec  *target.Spec
		field string // of the first error; "" for none
	}{
		{&target.Spec{Name: "web", Labels: in}, ""},
		{&target.Spec{Name: "db", Labels: in}, ""},
		{&target.Spec{Name: "web", Labels: in}, "targets[2].name"},
		{&target.Spec{Name: "other", Labels: map[string]string{"set": "b"}}, "targets[3].labels"},
		{&target.Spec{Name: "Not_A_Name", Labels: in}, "targets[4].name"},
		{&target.Spec{Name: "last", Labels: in}, ""},
	}
	for _, tt := range tests {
		errs := c.Add(tt.spec)
		if got := firstField(errs); got != tt.field {
			t.Errorf("Add(%s) = %v, want the first error at %q", tt.spec.Name, errs, tt.field)
		}
	}
	if c.Len() != len(tests) {
		t.Errorf("Len = %d, want %d", c.Len(), len(tests))
	}
}

func firstField(errs field.List) string {
	if len(errs) == 0 {
		return ""
	}
	return errs[0].Field
}
