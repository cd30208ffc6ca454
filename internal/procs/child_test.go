package procs_test

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/procs"
)

// TestChildEnds: each way a child ends is reported, and it is waited for
// (no zombie is left behind: Exited is closed only after Wait).
func TestChildEnds(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		end     func(c *procs.Child) error
		wantErr func(error) bool
	}{
		{
			name:    "exits by itself",
			script:  "exit 3",
			end:     func(c *procs.Child) error { <-c.Exited(); return c.Err() },
			wantErr: func(err error) bool { ee, ok := errors.AsType[*exec.ExitError](err); return ok && ee.ExitCode() == 3 },
		},
		{
			name:    "stops on SIGTERM",
			script:  "trap 'exit 0' TERM; while :; do sleep 0.01; done",
			end:     func(c *procs.Child) error { return c.Stop(10 * time.Second) },
			wantErr: func(err error) bool { return err == nil },
		},
		{
			name:    "killed when it ignores SIGTERM",
			script:  "trap '' TERM; while :; do sleep 0.01; done",
			end:     func(c *procs.Child) error { return c.Stop(100 * time.Millisecond) },
			wantErr: func(err error) bool { return errors.Is(err, procs.ErrKilled) },
		},
		{
			name:    "killed",
			script:  "trap '' TERM; while :; do sleep 0.01; done",
			end:     func(c *procs.Child) error { return c.Kill() },
			wantErr: func(err error) bool { return err == nil },
		},
		{
			name:    "signalled",
			script:  ":; while :; do sleep 0.01; done",
			end:     func(c *procs.Child) error { _ = c.Signal(syscall.SIGINT); <-c.Exited(); return c.Err() },
			wantErr: func(err error) bool { ee, ok := errors.AsType[*exec.ExitError](err); return ok && ee.ExitCode() == -1 },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The script says when its traps are set.
			cmd := exec.Command("sh", "-c", strings.Replace(tt.script, ";", "; echo ready;", 1))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			c, err := procs.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" && tt.script != "exit 3" {
				t.Fatalf("the script printed %q, %v", line, err)
			}
			if err := tt.end(c); !tt.wantErr(err) {
				t.Errorf("ended with %v", err)
			}
			select {
			case <-c.Exited():
			default:
				t.Fatal("Exited is not closed after the end")
			}
		})
	}
}
