package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestApplyPrune: apply --prune --selector makes the directory the whole
// set (kubectl's convention): --dry-run prints the plan and changes
// nothing; the apply creates, then leaves unchanged, updates and prunes;
// a target created without --prune is a conflict, never taken over.
func TestApplyPrune(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	mustCreate(t, c, &probev1.Target{Name: "team-a/plain", Labels: map[string]string{"app": "web"}})
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: web-0\nlabels: {app: web}\n---\nname: web-1\nlabels: {app: web}\n")
	run := func(want string, args ...string) {
		t.Helper()
		r := probectl(ctx, s.Addr, "", append([]string{"apply", "-n", "team-a", "--prune", "-l", "app=web", "-f", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("apply %v: code %d, stderr %q", args, r.code, r.err)
		}
		if diff := cmp.Diff(want, r.out); diff != "" {
			t.Errorf("apply %v (-want +got):\n%s", args, diff)
		}
	}
	run("target/team-a/web-0 created (dry run)\ntarget/team-a/web-1 created (dry run)\n", "--dry-run")
	if got := listedNames(t, s.Addr); !cmp.Equal(got, []string{"team-a/plain"}) {
		t.Fatalf("after a dry run: %v", got)
	}
	run("target/team-a/web-0 created\ntarget/team-a/web-1 created\n")
	run("target/team-a/web-0 unchanged\ntarget/team-a/web-1 unchanged\n")
	write("a.yaml", "name: web-0\nlabels: {app: web, tier: front}\n")
	run("target/team-a/web-0 configured\ntarget/team-a/web-1 pruned\n")

	// Another namespace's set with the same selector is its own: applying
	// it prunes nothing of team-a's.
	if r := probectl(ctx, s.Addr, "name: web-9\nlabels: {app: web}\n", "apply", "-n", "team-b", "--prune", "-l", "app=web", "-f", "-"); r.code != 0 || r.out != "target/team-b/web-9 created\n" {
		t.Errorf("apply -n team-b --prune: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	run("target/team-a/web-0 unchanged\n")

	r := probectl(ctx, s.Addr, "", "list", "-n", "team-a", "-o", "wide")
	rows := tableRows(r.out)
	col := slices.Index(rows[0], "OWNER")
	if r.code != 0 || len(rows) != 3 || col < 0 || rows[1][col] != "-" || rows[2][col] != "team-a/probectl" {
		t.Errorf("list -o wide: code %d, rows %q; want an OWNER column, - for team-a/plain and team-a/probectl for team-a/web-0", r.code, rows)
	}

	write("b.yaml", "name: plain\nlabels: {app: web}\n")
	r = probectl(ctx, s.Addr, "", "apply", "-n", "team-a", "--prune", "-l", "app=web", "-f", dir)
	if r.code == 0 || !strings.Contains(r.err, "target/team-a/plain: conflict: exists, created by CreateTarget") {
		t.Errorf("a name held outside the set: code %d, stderr %q", r.code, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "apply", "--prune", "-f", dir); r.code == 0 || !strings.Contains(r.err, "--prune needs --selector") {
		t.Errorf("--prune without --selector: code %d, stderr %q", r.code, r.err)
	}
}

func listedNames(t *testing.T, addr string) []string {
	t.Helper()
	r := probectl(t.Context(), addr, "", "list")
	var names []string
	for _, row := range tableRows(r.out)[1:] {
		names = append(names, row[0])
	}
	return names
}
