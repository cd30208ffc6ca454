package procs_test

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/probed/probed/internal/procs"
)

// interruptChildEnv runs this test binary as the child of
// TestRestoreInterrupt: "restore" or "keep".
const interruptChildEnv = "PROBED_PROCS_INTERRUPT_CHILD"

// TestRestoreInterrupt: this test binary, started with SIGINT ignored (as
// a background job is), starts a shell that sends itself SIGINT. Without
// RestoreInterrupt the shell ignores it and exits 7; with it, SIGINT ends
// the shell.
func TestRestoreInterrupt(t *testing.T) {
	if mode := os.Getenv(interruptChildEnv); mode != "" {
		if mode == "restore" {
			procs.RestoreInterrupt()
		}
		err := exec.Command("sh", "-c", "kill -INT $$; exit 7").Run()
		ee, ok := errors.AsType[*exec.ExitError](err)
		if !ok {
			t.Fatalf("the shell: %v", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() && ws.Signal() == syscall.SIGINT {
			os.Exit(2) // ended by SIGINT
		}
		os.Exit(ee.ExitCode()) // 7: SIGINT ignored
	}
	for _, tt := range []struct {
		mode string
		want int
	}{{"keep", 7}, {"restore", 2}} {
		t.Run(tt.mode, func(t *testing.T) {
			// sh ignores SIGINT (trap ''), then becomes this test binary:
			// it starts with SIGINT ignored.
			cmd := exec.Command("sh", "-c", `trap '' INT; exec "$0" -test.run='^TestRestoreInterrupt$'`, os.Args[0])
			cmd.Env = append(os.Environ(), interruptChildEnv+"="+tt.mode)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.want {
				t.Errorf("exit %d, want %d (7: the child ignored SIGINT; 2: SIGINT ended it)\n%s", code, tt.want, out)
			}
		})
	}
}
