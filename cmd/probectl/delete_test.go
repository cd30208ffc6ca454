package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestDeleteCommand(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	// A preStop sleep keeps each target TERMINATING after the delete (a
	// target without one can be gone before DeleteTarget reads it back).
	for _, name := range []string{"a", "b"} {
		mustCreate(t, c, &probev1.Target{
			Name:      name,
			Lifecycle: &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: 5}}}},
		})
	}

	if r := probectl(ctx, s.Addr, "", "delete", "a"); r.code != 0 || r.out != "target/a deleted\n" {
		t.Errorf("delete a: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	r := probectl(ctx, s.Addr, "", "-o", "json", "delete", "b")
	var got probev1.Target
	if r.code != 0 || unmarshalJSON(r.out, &got) != nil || got.GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
		t.Errorf("delete -o json: code %d, stdout %q, stderr %q; want the target, terminating", r.code, r.out, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "delete", "nope"); r.code != 1 || r.err != "Error: target \"nope\": not found\n" {
		t.Errorf("delete nope: code %d, stderr %q", r.code, r.err)
	}
}

// TestDeleteGracePeriod: a target whose preStop sleep and grace period
// are int64 max never leaves TERMINATING; `delete --grace-period 0`
// removes it at once, also when it is terminating already.
func TestDeleteGracePeriod(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	forever := int64(math.MaxInt64)
	mustCreate(t, c, &probev1.Target{
		Name:                          "stuck",
		TerminationGracePeriodSeconds: &forever,
		Lifecycle:                     &probev1.Lifecycle{PreStop: &probev1.LifecycleHandler{Action: &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: forever}}}},
	})
	if r := probectl(ctx, s.Addr, "", "delete", "stuck"); r.code != 0 {
		t.Fatalf("delete: code %d, stderr %q", r.code, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "delete", "--grace-period", "-2", "stuck"); r.code == 0 || !strings.Contains(r.err, "--grace-period -2") {
		t.Errorf("delete --grace-period -2: code %d, stderr %q; want an error naming the flag", r.code, r.err)
	}
	if r := probectl(ctx, s.Addr, "", "delete", "--grace-period", "0", "stuck"); r.code != 0 {
		t.Fatalf("delete --grace-period 0: code %d, stderr %q", r.code, r.err)
	}
	poll.UntilMet(t, "the target deleted", 10*time.Second, func() string {
		_, err := c.Get(ctx, "stuck")
		if errors.Is(err, client.ErrNotFound) {
			return ""
		}
		return fmt.Sprintf("the target is still there 10s after delete --grace-period 0: %v", err)
	})
}

// TestDeleteSeveral: delete takes several names, -l, -f and --all, deletes
// each target once, and goes on past a name that is not found.
func TestDeleteSeveral(t *testing.T) {
	t.Parallel()
	s, c := server(t)
	ctx := t.Context()
	create := func(names ...string) {
		for _, n := range names {
			labels := map[string]string{}
			if strings.HasPrefix(n, "x-") {
				labels["app"] = "x"
			}
			mustCreate(t, c, &probev1.Target{Name: n, Labels: labels})
		}
	}
	remaining := func() []string {
		ts, err := c.ListAll(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tg := range ts {
			if tg.GetStatus().GetPhase() != probev1.Phase_PHASE_TERMINATING {
				names = append(names, tg.GetName())
			}
		}
		return names
	}
	create("a", "b", "x-1", "x-2", "f", "keep")

	for _, tt := range []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
		left     []string
	}{
		{name: "nothing named", args: []string{"delete"}, wantCode: 1, wantErr: "delete needs target names"},
		{name: "bad selector", args: []string{"delete", "-l", "app"}, wantCode: 1, wantErr: "bad label selector"},
		{name: "names, one twice, one unknown", args: []string{"delete", "a", "nope", "b", "a"}, wantCode: 1,
			wantOut: "target/a deleted\ntarget/b deleted\n", wantErr: "target/nope: target \"nope\": not found\nError: 1 of 3 targets not deleted\n",
			left: []string{"f", "keep", "x-1", "x-2"}},
		{name: "selector", args: []string{"delete", "-l", "app=x"}, wantOut: "target/x-1 deleted\ntarget/x-2 deleted\n", left: []string{"f", "keep"}},
		{name: "file", stdin: "name: f\n", args: []string{"delete", "-f", "-"}, wantOut: "target/f deleted\n", left: []string{"keep"}},
		{name: "all", args: []string{"delete", "--all", "--grace-period", "0"}, wantOut: "target/keep deleted\n"},
		{name: "all of none", args: []string{"delete", "--all"}, wantErr: "no target to delete\n"},
	} {
		r := probectl(ctx, s.Addr, tt.stdin, tt.args...)
		if r.code != tt.wantCode || r.out != tt.wantOut || !strings.Contains(r.err, tt.wantErr) {
			t.Errorf("%s: %q: code %d, stdout %q, stderr %q; want %d, %q, %q", tt.name, tt.args, r.code, r.out, r.err, tt.wantCode, tt.wantOut, tt.wantErr)
		}
		if tt.wantCode == 0 || tt.left != nil {
			if got := remaining(); !slices.Equal(got, tt.left) {
				t.Errorf("%s: left %q, want %q", tt.name, got, tt.left)
			}
		}
	}
}
