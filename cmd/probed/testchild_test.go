package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/probed/probed/internal/probedproc"
)

// testChild is this test binary run again as a child process that runs
// one test of its own (a grpc-go xDS client, hundreds of channels): it
// reports in lines on its stdout and ends when its stdin is closed.
type testChild struct {
	test   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *probedproc.Log
	done   chan struct{} // closed once its stdout is read to the end
	grace  time.Duration
}

// startTestChild starts the test named test (the whole name) in a child
// with env added to this process's environment, and hands each line of
// its stdout to line, on a goroutine of its own. The child is stopped at
// t's cleanup: its stdin is closed, and it is killed if it has not ended
// grace later; a child that fails fails t.
func startTestChild(t *testing.T, test string, env []string, grace time.Duration, line func(string)) *testChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	c := &testChild{test: test, cmd: cmd, stderr: &probedproc.Log{}, done: make(chan struct{}), grace: grace}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line(sc.Text())
		}
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop ends the child and waits for it.
func (c *testChild) stop(t *testing.T) {
	if c.stdin == nil {
		return
	}
	_ = c.stdin.Close()
	c.stdin = nil
	select {
	case <-c.done:
	case <-time.After(c.grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("%s: %v\n%s", c.test, err, c.stderr.String())
	}
}
