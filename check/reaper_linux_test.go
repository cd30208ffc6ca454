package check_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/internal/procs"
)

// TestReaperReapsWhatExecProbesLeave: with the reaper started this process
// is a child subreaper, so the children exec commands leave behind (a
// background child of a command that exited, the children of one killed
// at its deadline) are re-parented to it; the reaper reaps them all, and
// never a command an exec checker is waiting for: every check, run
// concurrently with the reaping, gets its command's own result.
//
// Not parallel: while the reaper runs, a child this test binary starts
// and waits for outside an exec checker could be reaped by it.
func TestReaperReapsWhatExecProbesLeave(t *testing.T) {
	stop, err := check.StartReaper(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	opts := check.Options{AllowExec: true}
	background := open(t, opts, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", "sleep 30 & echo ok"}}})
	timesOut := open(t, opts, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", "sleep 30 & sleep 30 & wait"}}})
	exits := open(t, opts, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", "exit 3"}}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				wantOutcome(t, run(t, background, timeout), probe.Success, "ok", false)
				wantOutcome(t, run(t, timesOut, 100*time.Millisecond), probe.Failure, "command did not finish: context deadline exceeded", false)
				wantOutcome(t, run(t, exits, timeout), probe.Failure, "command exited with status 3", false)
			}
		})
	}
	wg.Wait()
	poll.UntilMet(t, "no zombie children", 10*time.Second, func() string {
		n, err := procs.Zombies(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("%d zombie children 10s after the checks, want 0", n)
	})
}
