package main

import (
	"testing"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestResetCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	before := mustCreate(t, c, &probev1.Target{Name: "a"})

	if r := probectl(ctx, s.Addr, "", "reset", "a"); r.code != 0 || r.out != "target/a reset\n" {
		t.Errorf("reset: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	r := probectl(ctx, s.Addr, "", "-o", "json", "reset", "a")
	var got probev1.Target
	if r.code != 0 || unmarshalJSON(r.out, &got) != nil || got.GetStatus().GetRevision() <= before.GetStatus().GetRevision() {
		t.Errorf("reset -o json: code %d, stdout %q, stderr %q; want the target at a newer revision", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "reset", "nope"); r.code != 1 || r.err != "Error: target \"nope\": not found\n" {
		t.Errorf("reset nope: code %d, stderr %q", r.code, r.err)
	}
}
