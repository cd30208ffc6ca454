package check_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/poll"
)

func TestExec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		command  []string
		deadline time.Duration
		want     probe.Result
		wantMsg  string
		contains bool
	}{
		{name: "true", command: []string{"true"}, want: probe.Success},
		{name: "false", command: []string{"false"}, want: probe.Failure, wantMsg: "command exited with status 1"},
		{name: "output", command: []string{"echo", "  ready  "}, want: probe.Success, wantMsg: "ready"},
		{
			name:    "stdout and stderr",
			command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			want:    probe.Failure, wantMsg: `command exited with status 3: out\nerr`, // one line: control characters are escaped
		},
		{
			name: "signal", command: []string{"sh", "-c", "kill -TERM $$"},
			want: probe.Failure, wantMsg: "command terminated by signal 15 (terminated)",
		},
		{
			name: "not found", command: []string{"probed-no-such-command"},
			want: probe.Failure, wantMsg: `exec: "probed-no-such-command": executable file not found in $PATH`,
		},
		{
			name: "deadline", command: []string{"sleep", "10"}, deadline: 200 * time.Millisecond,
			want: probe.Failure, wantMsg: "command did not finish: context deadline exceeded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := tt.deadline
			if d == 0 {
				d = timeout
			}
			c := open(t, check.Options{AllowExec: true}, probe.Handler{Exec: &probe.Exec{Command: tt.command}})
			wantOutcome(t, run(t, c, d), tt.want, tt.wantMsg, tt.contains)
		})
	}
}

func TestExecOutputTruncated(t *testing.T) {
	t.Parallel()
	// 30000 bytes on stdout, then more on stderr, then failure.
	script := `i=0; while [ $i -lt 300 ]; do printf '%0100d' 0; i=$((i+1)); done; echo tail >&2; exit 2`
	c := open(t, check.Options{AllowExec: true}, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", script}}})
	out := run(t, c, timeout)
	const head = "command exited with status 2: "
	if out.Result != probe.Failure || !strings.HasPrefix(out.Message, head) {
		t.Fatalf("Check() = %v %.80q; want failure starting %q", out.Result, out.Message, head)
	}
	// The output kept (10 KiB) and the head make more than a message
	// may hold: it is cut to probe.MaxMessageBytes, and says so.
	if len(out.Message) != probe.MaxMessageBytes || !strings.HasSuffix(out.Message, probe.TruncatedSuffix) {
		t.Errorf("message of %d bytes ending %q; want %d bytes ending %q", len(out.Message), out.Message[len(out.Message)-20:], probe.MaxMessageBytes, probe.TruncatedSuffix)
	}
	if strings.Contains(out.Message, "tail") {
		t.Errorf("message holds output written after the first 10 KiB")
	}
}

func TestExecKillsProcessGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   string
		deadline time.Duration
		want     probe.Result
		wantMsg  string
	}{
		{
			// Killed at the deadline, with the child in the background.
			name: "deadline", script: "sleep 30 & echo $!; sleep 30", deadline: 200 * time.Millisecond,
			want: probe.Failure, wantMsg: "command did not finish: context deadline exceeded: ",
		},
		{
			// Exits at once, leaving a child that holds the output pipe.
			name: "exited", script: "sleep 30 & echo $!", deadline: timeout,
			want: probe.Success,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := open(t, check.Options{AllowExec: true}, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", tt.script}}})
			out := run(t, c, tt.deadline)
			if out.Result != tt.want || !strings.HasPrefix(out.Message, tt.wantMsg) {
				t.Fatalf("Check() = %v %q; want %v starting %q", out.Result, out.Message, tt.want, tt.wantMsg)
			}
			pid, err := strconv.Atoi(strings.TrimPrefix(out.Message, tt.wantMsg))
			if err != nil {
				t.Fatalf("no child pid in the message %q: %v", out.Message, err)
			}
			waitGone(t, pid)
		})
	}
}

// waitGone fails t unless process pid (a "sleep") is gone or a zombie soon.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	poll.UntilMet(t, "child "+strconv.Itoa(pid)+" gone", 2*time.Second, func() string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return "" // gone (and reaped)
		}
		// pid (comm) state ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(sleep") || strings.HasPrefix(s[i+1:], " Z") || strings.HasPrefix(s[i+1:], " X") {
			return "" // a zombie, or the pid was reused by another program
		}
		return fmt.Sprintf("child %d still running after the check: %s", pid, s)
	})
}

// TestExecOutputOfACommandThatLeftAChild: the output of a command that
// exited 0 leaving a background child holding its output pipe is the
// probe's message, however late the process gets to read it. The Go
// scheduler is made busy (one P, goroutines that never block), as a
// loaded machine makes it: the goroutine that reads the pipe then runs
// long after the command has exited. Before, the pipe was closed
// execWaitDelay after the exit whether or not it had been read, and the
// message was lost ("", 3 runs in 40 of the reaper test under load).
//
// Not parallel: it sets GOMAXPROCS.
func TestExecOutputOfACommandThatLeftAChild(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var busy sync.WaitGroup
	defer busy.Wait()
	defer stop.Store(true)
	for range 8 {
		busy.Go(func() {
			for !stop.Load() {
			}
		})
	}
	c := open(t, check.Options{AllowExec: true}, probe.Handler{Exec: &probe.Exec{Command: []string{"sh", "-c", "sleep 30 & echo ok"}}})
	for range 5 {
		wantOutcome(t, run(t, c, time.Minute), probe.Success, "ok", false)
	}
}
