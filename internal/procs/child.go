package procs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Child is a process started by Start: it is waited for by a goroutine of
// its own from the start, so that its end can be selected on (Exited)
// while the caller does other things, and it leaves no zombie.
type Child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // what Wait returned; set before exited is closed
}

// ErrKilled is what Stop returns when the process did not end within its
// grace period and was killed.
var ErrKilled = errors.New("did not stop within its grace period; killed")

// Start starts cmd (configured and not started) and waits for it in the
// background. The caller must end it with Stop or Kill, or see it exit.
func Start(cmd *exec.Cmd) (*Child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Pid is the process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited is closed when the process has ended and been waited for.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Err is what waiting for the process returned (nil for exit status 0);
// call it once Exited is closed.
func (c *Child) Err() error { return c.err }

// Signal sends sig to the process; it is an error once the process has
// ended.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Stop ends the process gracefully, with SIGTERM, and waits for it; if it
// is still there after grace, it is killed (SIGKILL) and Stop returns an
// error wrapping ErrKilled. Otherwise it returns the exit error (nil for
// status 0). Stopping an exited process returns how it exited.
func (c *Child) Stop(grace time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.err
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s: %w", c.cmd.Path, ErrKilled)
	}
}

// Kill ends the process with SIGKILL and waits for it. It returns nil when
// the process died of that signal (or had already exited), else what
// waiting for it returned.
func (c *Child) Kill() error {
	_ = c.cmd.Process.Kill()
	<-c.exited
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return nil
	}
	return c.err
}
