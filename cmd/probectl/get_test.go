package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"sigs.k8s.io/yaml"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestGetCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	b := probedtest.NewBackend(t, true)
	mustCreate(t, c, b.Readiness("web"))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want, err := c.WaitReady(wctx, "web")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("table", func(t *testing.T) {
		r := probectl(ctx, s.Addr, "", "get", "web")
		if r.code != 0 {
			t.Fatalf("code %d, stderr %q", r.code, r.err)
		}
		rows := tableRows(r.out)
		wantRows := [][]string{
			{"NAME", "PHASE", "STARTED", "LIVE", "READY", "STARTUP", "LIVENESS", "READINESS", "AGE", "MESSAGE"},
			{"web", "Active", "true", "true", "true", "-", "-", "success/100ms", "-"},
		}
		if len(rows) != 2 || len(rows[1]) != 10 {
			t.Fatalf("table = %q, want a header and one row of 10 columns", r.out)
		}
		rows[1] = slices.Delete(rows[1], 8, 9) // AGE varies
		if diff := cmp.Diff(wantRows, rows); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})

	t.Run("json", func(t *testing.T) {
		r := probectl(ctx, s.Addr, "", "-o", "json", "get", "web")
		var got probev1.Target
		if r.code != 0 || unmarshalJSON(r.out, &got) != nil {
			t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.out, r.err)
		}
		if !strings.HasPrefix(r.out, "{\n  \"name\": \"web\",\n") {
			t.Errorf("json is not indented: %q", r.out)
		}
		if got.GetName() != "web" || !got.GetStatus().GetReady() {
			t.Errorf("json target = %v, want web ready", &got)
		}
		if again := probectl(ctx, s.Addr, "", "-o", "json", "get", "web"); strings.Count(again.out, "\n") != strings.Count(r.out, "\n") {
			t.Errorf("json layout changed between runs:\n%s\n%s", r.out, again.out)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		r := probectl(ctx, s.Addr, "", "-o", "yaml", "get", "web")
		if r.code != 0 {
			t.Fatalf("code %d, stderr %q", r.code, r.err)
		}
		j, err := yaml.YAMLToJSON([]byte(r.out))
		if err != nil {
			t.Fatal(err)
		}
		var got probev1.Target
		if err := unmarshalJSON(string(j), &got); err != nil {
			t.Fatalf("yaml is not a target: %v\n%s", err, r.out)
		}
		// Spec fields round-trip; the status moves on.
		got.Status, want.Status = nil, nil
		if diff := cmp.Diff(want, &got, protocmp.Transform()); diff != "" {
			t.Errorf("yaml target (-want +got):\n%s", diff)
		}
	})

	t.Run("yaml applies back", func(t *testing.T) {
		out := probectl(ctx, s.Addr, "", "-o", "yaml", "get", "web").out
		if r := probectl(ctx, s.Addr, out, "apply", "-f", "-"); r.code != 0 || r.out != "target/web configured\n" {
			t.Errorf("apply of get -o yaml: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
		}
	})

	t.Run("not found", func(t *testing.T) {
		r := probectl(ctx, s.Addr, "", "get", "nope")
		if r.code != 1 || r.out != "" || r.err != "Error: target \"nope\": not found\n" {
			t.Errorf("code %d, stdout %q, stderr %q", r.code, r.out, r.err)
		}
	})
}
