package main

import (
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/probedproc"
	"github.com/probed/probed/internal/procs"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestExecProbesLeaveNoZombiesAsPID1 runs a real probed as PID 1 of a new
// PID namespace (unshare --pid --fork --mount-proc), as in a container,
// where every orphan is re-parented to it, with two exec targets probed
// every 200 ms: one whose command times out with two children, one whose
// command exits 0 leaving a child in the background. Their leftovers are
// killed with the process group and must be reaped: the zombies among
// probed's children stay few while it probes (at most a handful between
// an exit and its SIGCHLD) and are none once the targets are deleted.
func TestExecProbesLeaveNoZombiesAsPID1(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a probed in a PID namespace for 10s")
	}
	if out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: cannot run a process as PID 1 of a new PID namespace here (unshare --pid --fork --mount-proc: %v: %s); run as root to test reaping", err, out)
	}
	t.Parallel()
	bin := buildProbed(t)
	addr := refused.Reserve(t).Addr()
	// unshare runs probed as PID 1 of the namespace and kills it when it
	// dies itself.
	p, err := probedproc.Start("unshare", []string{"--pid", "--fork", "--mount-proc", "--kill-child",
		bin, "--addr", addr, "--data-dir", t.TempDir(), "--metrics-addr=", "--ui-addr=", "--allow-exec"}, probedproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if err := p.WaitServing(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	pid1 := probedPID(t, p.Pid())

	c, _ := dialProbed(t, addr)
	minus800, minus900 := int32(-800), int32(-900)
	execTarget := func(name string, command ...string) *probev1.Target {
		return &probev1.Target{Name: name, ReadinessProbe: &probev1.Probe{
			Handler:             &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: command}},
			PeriodSeconds:       1,
			PeriodMilliseconds:  &minus800,
			TimeoutSeconds:      1,
			TimeoutMilliseconds: &minus900,
		}}
	}
	for _, tg := range []*probev1.Target{
		execTarget("times-out", "sh", "-c", "sleep 30 & sleep 30 & wait"),
		execTarget("backgrounds", "sh", "-c", "sleep 30 & echo ok"),
	} {
		if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: tg}); err != nil {
			t.Fatal(err)
		}
	}
	waitReadiness(t, c, "backgrounds", probev1.Result_RESULT_SUCCESS)

	const mostWhileProbing = 6
	// For 4 s of probing (a run every 200 ms per target: 40 runs, each of
	// which leaves its background sleeps behind), probed reaps them.
	var seen []int
	poll.Every(100*time.Millisecond).Holds(t, fmt.Sprintf("at most %d zombie children of probed (PID 1) while probing", mostWhileProbing), 4*time.Second, func() string {
		seen = append(seen, zombies(t, pid1))
		if most := slices.Max(seen); most > mostWhileProbing {
			return fmt.Sprintf("zombies over time: %v", seen)
		}
		return ""
	})
	if probed := probesTotal(t, c, "times-out") + probesTotal(t, c, "backgrounds"); probed < 10 {
		t.Fatalf("the exec targets ran %d times in 4s, want at least 10\n%s", probed, p.Log())
	}
	for _, name := range []string{"times-out", "backgrounds"} {
		if _, err := c.DeleteTarget(t.Context(), &probev1.DeleteTargetRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	poll.UntilMet(t, "no zombie children of probed", 5*time.Second, func() string {
		if n := zombies(t, pid1); n != 0 {
			return fmt.Sprintf("%d zombie children of probed (PID 1) 5s after the exec targets were deleted, want 0", n)
		}
		return ""
	})
}

// probedPID returns the host pid of the probed unshare (pid) forked: its
// one child.
func probedPID(t *testing.T, unshare int) int {
	t.Helper()
	kids, err := procs.Children(unshare)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 {
		t.Fatalf("unshare %d has children %+v, want one: probed", unshare, kids)
	}
	return kids[0].Pid
}

func zombies(t *testing.T, ppid int) int {
	t.Helper()
	n, err := procs.Zombies(ppid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
