package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestNamespaceFlag: -n NAMESPACE makes a NAME without '/' mean
// NAMESPACE/NAME (get, delete, apply's specs) and limits list to the
// namespace, as kubectl's -n does; a spec of another namespace is refused.
func TestNamespaceFlag(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	for _, n := range []string{"solo", "team-a/web", "team-ab/web", "team-b/web"} {
		mustCreate(t, c, &probev1.Target{Name: n})
	}
	listed := func(args ...string) []string {
		t.Helper()
		r := probectl(ctx, s.Addr, "", append([]string{"list"}, args...)...)
		if r.code != 0 {
			t.Fatalf("list %v: code %d, stderr %q", args, r.code, r.err)
		}
		var names []string
		for _, row := range tableRows(r.out)[1:] {
			names = append(names, row[0])
		}
		return names
	}
	if diff := cmp.Diff([]string{"team-a/web"}, listed("-n", "team-a")); diff != "" {
		t.Errorf("list -n team-a (-want +got):\n%s", diff)
	}
	if r := probectl(ctx, s.Addr, "", "get", "-n", "team-b", "web"); r.code != 0 || !strings.Contains(r.out, "team-b/web") {
		t.Errorf("get -n team-b web: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "name: db.eu\n", "apply", "-n", "team-a", "-f", "-"); r.code != 0 || !strings.Contains(r.out, "target/team-a/db.eu created") {
		t.Errorf("apply -n team-a: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "name: team-b/x\n", "apply", "-n", "team-a", "-f", "-"); r.code == 0 || !strings.Contains(r.err, `not in namespace "team-a"`) {
		t.Errorf("apply -n team-a of team-b/x: code %d, stderr %q", r.code, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "delete", "-n", "team-a", "web", "--grace-period=0"); r.code != 0 {
		t.Errorf("delete -n team-a web: code %d, stderr %q", r.code, r.err)
	}
	if diff := cmp.Diff([]string{"solo", "team-a/db.eu", "team-ab/web", "team-b/web"}, listed()); diff != "" {
		t.Errorf("list after delete (-want +got):\n%s", diff)
	}
}
