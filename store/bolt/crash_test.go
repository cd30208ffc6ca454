package bolt_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/store/bolt"
	"github.com/probed/probed/store/storetest"
)

// crashEnv names the data dir the child process of TestCrashAfterCommit
// commits into.
const crashEnv = "PROBED_BOLT_CRASH_DIR"

// crashChild is the child of TestCrashAfterCommit (the test binary run
// again, from TestMain): it commits two batches, prints the revision of
// the last one, and waits to be killed.
func crashChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	s, err := bolt.Open(os.Getenv(crashEnv))
	if err != nil {
		fail(err)
	}
	var creates []*engine.Change
	for _, spec := range storetest.Specs() {
		creates = append(creates, storetest.Create(spec, storetest.Epoch))
	}
	if err := s.Commit(context.Background(), creates); err != nil {
		fail(err)
	}
	tr := storetest.Transition(creates[0].Target, probe.Startup, probe.Success, 1, storetest.Epoch.Add(time.Second))
	if err := s.Commit(context.Background(), []*engine.Change{tr}); err != nil {
		fail(err)
	}
	fmt.Printf("committed %d\n", tr.Event.Revision) // os.Stdout is unbuffered
	time.Sleep(time.Minute)                         // SIGKILL comes first; no Close, no clean exit
	fail(fmt.Errorf("not killed"))
}

// TestCrashAfterCommit kills (SIGKILL) a process right after its Commit
// returned and checks that what it committed is there. This proves that
// nothing is kept in the process once Commit returns; that the data reach
// the disk itself is fsync's part (bbolt's NoSync stays false), which only
// a power cut would test.
func TestCrashAfterCommit(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("child printed %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL; stderr:\n%s", err, stderr.String())
	}
	rev, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "committed "), 10, 64)
	if err != nil {
		t.Fatalf("child printed %q: %v", line, err)
	}

	s := mustOpen(t, dir) // the lock died with the child
	defer closeStore(t, s)
	st, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if len(st.Targets) != 3 || len(st.Events) != 4 || st.Revision != rev {
		t.Fatalf("after SIGKILL: %d targets, %d events, revision %d; want 3, 4, %d", len(st.Targets), len(st.Events), st.Revision, rev)
	}
	for _, tg := range st.Targets {
		if tg.Spec.Name == "web" && tg.Status.Probes[probe.Startup].Result != probe.Success {
			t.Errorf("after SIGKILL web's startup probe is %s, want the committed success", tg.Status.Probes[probe.Startup].Result)
		}
	}
}
