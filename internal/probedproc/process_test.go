package probedproc_test

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedproc"
)

// TestProcess runs shell scripts standing in for probed (one logs
// "probed serving") through each way a Process serves or ends.
func TestProcess(t *testing.T) {
	t.Parallel()
	const serves = `echo starting; echo 'level=INFO msg="probed serving"' >&2; `
	tests := []struct {
		name   string
		script string
		// run drives the process and returns what the test checks.
		run   func(*probedproc.Process) error
		check func(t *testing.T, p *probedproc.Process, err error)
	}{
		{
			name:   "serves, then killed",
			script: serves + "exec sleep 60",
			run: func(p *probedproc.Process) error {
				if err := p.WaitServing(30 * time.Second); err != nil {
					return err
				}
				return p.Kill()
			},
			check: func(t *testing.T, p *probedproc.Process, err error) {
				if err != nil || p.Running() || !strings.Contains(p.Log(), "starting\n") {
					t.Errorf("err %v, running %v, log %q; want it served, killed, its stdout kept", err, p.Running(), p.Log())
				}
			},
		},
		{
			name:   "exits before serving",
			script: "echo 'bad flag' >&2; exit 3",
			run:    func(p *probedproc.Process) error { return p.WaitServing(30 * time.Second) },
			check: func(t *testing.T, p *probedproc.Process, err error) {
				ee, ok := errors.AsType[*exec.ExitError](err)
				if !errors.Is(err, probedproc.ErrExited) || !ok || ee.ExitCode() != 3 || !strings.Contains(err.Error(), "bad flag") {
					t.Errorf("WaitServing = %v; want ErrExited with exit status 3 and the log", err)
				}
			},
		},
		{
			name:   "never serves",
			script: "exec sleep 60",
			run:    func(p *probedproc.Process) error { return p.WaitServing(50 * time.Millisecond) },
			check: func(t *testing.T, p *probedproc.Process, err error) {
				if err == nil || errors.Is(err, probedproc.ErrExited) || !strings.Contains(err.Error(), "did not serve within 50ms") || p.Running() {
					t.Errorf("WaitServing = %v, running %v; want a timeout, the process killed", err, p.Running())
				}
			},
		},
		{
			name:   "stopped, then killed",
			script: serves + "exec sleep 60",
			run: func(p *probedproc.Process) error {
				if err := p.WaitServing(30 * time.Second); err != nil {
					return err
				}
				if err := p.Signal(syscall.SIGSTOP); err != nil {
					return err
				}
				return p.Kill()
			},
			check: func(t *testing.T, p *probedproc.Process, err error) {
				if err != nil || p.Running() {
					t.Errorf("Kill of a stopped process = %v, running %v; want it killed", err, p.Running())
				}
			},
		},
		{
			name: "stopped, then stopped gracefully",
			// The trap is set before the script says it serves: set
			// after, a SIGTERM could arrive first and end it by default.
			script: "trap 'exit 0' TERM; " + serves + "while :; do sleep 0.01; done",
			run: func(p *probedproc.Process) error {
				if err := p.WaitServing(30 * time.Second); err != nil {
					return err
				}
				if err := p.Signal(syscall.SIGSTOP); err != nil {
					return err
				}
				return p.Stop(30 * time.Second)
			},
			check: func(t *testing.T, p *probedproc.Process, err error) {
				if err != nil || p.Running() {
					t.Errorf("Stop of a stopped process = %v, running %v; want exit status 0", err, p.Running())
				}
			},
		},
		{
			name:   "ends otherwise before the kill",
			script: serves + "exit 0",
			run: func(p *probedproc.Process) error {
				<-p.Exited()
				return p.Kill()
			},
			check: func(t *testing.T, p *probedproc.Process, err error) {
				if err == nil || !strings.Contains(err.Error(), "before it was killed") {
					t.Errorf("Kill of a process that exited with status 0 = %v, want an error saying so", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := probedproc.Start("sh", []string{"-c", tt.script}, probedproc.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Kill() })
			tt.check(t, p, tt.run(p))
		})
	}
}

// TestLogKeepsTheFirstMiB: a Log keeps what is written, up to a MiB, and
// drops the rest without failing the writer.
func TestLogKeepsTheFirstMiB(t *testing.T) {
	t.Parallel()
	var l probedproc.Log
	chunk := strings.Repeat("x", 300<<10)
	for range 4 {
		if n, err := l.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v; want all of it", n, err)
		}
	}
	if got := len(l.String()); got != 1<<20 {
		t.Errorf("kept %d bytes, want %d", got, 1<<20)
	}
}
