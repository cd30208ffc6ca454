package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/client"
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Get(ctx, "stuck")
		if errors.Is(err, client.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target is still there 10s after delete --grace-period 0: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
