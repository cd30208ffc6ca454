package check

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/probed/probed/engine/probe"
)

// maxExecOutput caps the combined output of an exec probe kept for its
// message (kubelet's 10 KiB); the rest is read and dropped.
const maxExecOutput = 10 << 10

// execWaitDelay bounds how long Check waits for the command's output pipe
// after the command exited or was killed (execOutput), and for the
// command to exit once killed: a child that inherited the pipe cannot
// hold the probe.
const execWaitDelay = 100 * time.Millisecond

// execChecker runs an exec probe's command on the probe host.
type execChecker struct {
	argv []string
}

// newExecChecker prepares the probe of e, refusing it unless exec probes
// are allowed and, with an allowlist, its command is listed.
func newExecChecker(e *probe.Exec, o *Options) (*execChecker, error) {
	if !o.AllowExec {
		return nil, ErrExecDisabled
	}
	if len(e.Command) == 0 || e.Command[0] == "" {
		return nil, errors.New("exec.command: a command is required")
	}
	if len(o.ExecAllowlist) > 0 && !slices.Contains(o.ExecAllowlist, e.Command[0]) {
		return nil, fmt.Errorf("exec.command %q: %w", e.Command[0], ErrExecNotAllowed)
	}
	return &execChecker{argv: slices.Clone(e.Command)}, nil
}

// Check runs the command in its own process group with probed's
// environment, stdin from /dev/null, and stdout and stderr captured
// together (at most 10 KiB). When ctx is done the whole group is killed,
// and before Check returns every process still in the group (children the
// command left behind) is sent SIGKILL; those, and any the command
// started in another group, are reaped by StartReaper's reaper once they
// exit (re-parented to probed, a child subreaper). Exit status 0 succeeds with the
// trimmed output as the message. Failures read "command exited with
// status 3: <output>", "command terminated by signal 15 (terminated):
// <output>", "command did not finish: context deadline exceeded:
// <output>", or give the error starting the command (e.g. `exec: "nope":
// executable file not found in $PATH`); ": <output>" is left out when
// there was none.
func (c *execChecker) Check(ctx context.Context) probe.Outcome {
	start := time.Now()
	out, err := newExecOutput()
	if err != nil {
		return probe.Outcome{Result: probe.Failure, Message: probe.BoundMessage(fmt.Sprintf("output pipe: %v", err)), Latency: time.Since(start)}
	}
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = execWaitDelay
	cmd.Stdout = out.w
	cmd.Stderr = out.w
	// Started and waited for as cmd.Run does, recorded meanwhile so that
	// the reaper (StartReaper) leaves it to cmd.Wait.
	release, err := children.start(cmd)
	out.started()
	if err == nil {
		err = cmd.Wait()
		release()
	}
	if cmd.Process != nil {
		// Children left behind by a command that exited. The group's id
		// cannot be reused while a member lives, so this reaches only
		// the command's own leftovers (and ends their hold on the
		// output pipe).
		_ = killGroup(cmd.Process.Pid)
	}
	res, msg := execResult(ctx, cmd, err, strings.TrimSpace(out.collect(execWaitDelay)))
	return probe.Outcome{Result: res, Message: probe.BoundMessage(msg), Latency: time.Since(start)}
}

// execResult maps how the command ended to a result and message.
func execResult(ctx context.Context, cmd *exec.Cmd, err error, output string) (probe.Result, string) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return probe.Success, output
	case ctx.Err() != nil:
		return probe.Failure, withOutput(fmt.Sprintf("command did not finish: %v", ctx.Err()), output)
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return probe.Failure, withOutput(fmt.Sprintf("command terminated by signal %d (%v)", int(ws.Signal()), ws.Signal()), output)
		}
		return probe.Failure, withOutput(fmt.Sprintf("command exited with status %d", ee.ExitCode()), output)
	default:
		return probe.Failure, withOutput(err.Error(), output)
	}
}

func withOutput(head, output string) string {
	if output == "" {
		return head
	}
	return head + ": " + output
}

// killGroup sends SIGKILL to the process group pgid; a group already gone
// is os.ErrProcessDone.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Close does nothing: an exec probe holds nothing between checks.
func (*execChecker) Close() {}

// cappedBuffer keeps the first maxExecOutput bytes written to it and drops
// the rest, never failing a write (a failed write would break the
// command's pipe and change how it exits). One goroutine at a time writes
// to it (execOutput).
type cappedBuffer struct {
	b []byte
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxExecOutput - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *cappedBuffer) String() string { return string(w.b) }
