package probedproc

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/probed/probed/internal/procs"
)

// ErrExited is what WaitServing returns, wrapped with how it ended, when
// the process exited before it served.
var ErrExited = errors.New("exited before it served")

// Process is probed running as a child process, the one way the process
// tests, the cluster soak, the browser test and the benchmarks run it:
// its stdout and stderr are kept (Log) and copied to Options.Output, the
// moment it serves is seen in its log (Serving), its end can be selected
// on (Exited), and it never outlives the process that started it (it
// gets SIGKILL when that one dies). The caller ends it (Kill, Stop) or
// sees it exit.
type Process struct {
	child   *procs.Child
	serving *Serving
	log     *Log
}

// Options tune a Process; the zero value is fine.
type Options struct {
	// Output also receives the process's stdout and stderr (a log file of
	// the caller's, say); nil: only Log keeps them.
	Output io.Writer
	// Env is the environment; nil: the caller's.
	Env []string
}

// Start starts bin with args and returns without waiting for it to serve
// (WaitServing, Serving).
func Start(bin string, args []string, opts Options) (*Process, error) {
	p := &Process{serving: NewServing(), log: &Log{}}
	out := io.Writer(p.log)
	if opts.Output != nil {
		out = io.MultiWriter(p.log, opts.Output)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = opts.Env
	cmd.Stdout, cmd.Stderr = out, io.MultiWriter(out, p.serving)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The copying goroutines end with the process: its children (exec
	// probes) may hold the pipes no longer than this.
	cmd.WaitDelay = 10 * time.Second
	child, err := procs.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p.child = child
	return p, nil
}

// Serving is closed once the process has logged ServingLog.
func (p *Process) Serving() <-chan struct{} { return p.serving.Done() }

// Exited is closed once the process has ended and been waited for.
func (p *Process) Exited() <-chan struct{} { return p.child.Exited() }

// Err is how the process ended (nil for exit status 0); call it once
// Exited is closed.
func (p *Process) Err() error { return p.child.Err() }

// Running reports whether the process has not ended.
func (p *Process) Running() bool {
	select {
	case <-p.child.Exited():
		return false
	default:
		return true
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.child.Pid() }

// Log is what the process wrote to stdout and stderr so far (its first
// MiB).
func (p *Process) Log() string { return p.log.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.child.Signal(sig) }

// WaitServing waits until the process serves and returns nil; if it exits
// first, an error wrapping ErrExited and how it ended, with its log; if
// limit passes first, it kills it and returns an error saying so.
func (p *Process) WaitServing(limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.Serving():
		return nil
	case <-p.Exited():
		return fmt.Errorf("probed %w: %w\n%s", ErrExited, p.Err(), p.Log())
	case <-t.C:
		_ = p.child.Kill()
		return fmt.Errorf("probed did not serve within %v (killed)\n%s", limit, p.Log())
	}
}

// Kill ends the process with SIGKILL (a stopped one too) and waits for
// it. It returns an error, with the log, when the process had ended by
// itself before (with any status).
func (p *Process) Kill() error {
	if !p.Running() {
		if err := p.Err(); err != nil {
			return fmt.Errorf("probed ended (%w) before it was killed\n%s", err, p.Log())
		}
		return fmt.Errorf("probed ended (exit status 0) before it was killed\n%s", p.Log())
	}
	if err := p.child.Kill(); err != nil {
		return fmt.Errorf("probed ended with %w before it was killed\n%s", err, p.Log())
	}
	return nil
}

// Stop ends the process gracefully (SIGTERM; a stopped one is continued
// first) and waits for it, killing it after grace; it returns how it
// ended (procs.Child.Stop).
func (p *Process) Stop(grace time.Duration) error {
	_ = p.child.Signal(syscall.SIGCONT)
	return p.child.Stop(grace)
}

// FreeAddr returns a 127.0.0.1 address with a port nobody listens on at
// the moment, for a server a child process starts a little later (a test
// with a testing.T reserves one instead: internal/refused). The port is
// below Linux's ephemeral range (32768-60999), so that no outgoing
// connection takes it in the meantime.
func FreeAddr() (string, error) {
	var err error
	for range 100 {
		var lis net.Listener
		lis, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err == nil {
			addr := lis.Addr().String()
			return addr, lis.Close()
		}
	}
	return "", fmt.Errorf("no free port from 20000 to 31999: %w", err)
}
