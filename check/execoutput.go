package check

import (
	"io"
	"os"
	"syscall"
	"time"
)

// execOutput is the pipe an exec command writes its stdout and stderr to,
// and what has been read from it. It is read from the start (a command
// that writes more than a pipe holds is never blocked) until every
// writer is gone: the command, and the children it left behind, which
// Check kills once it has exited. A child that got away (another process
// group) cannot hold the probe: execWaitDelay after the command ended,
// the output is what was read, plus what the pipe holds then.
//
// The pipe is the process's own, not one os/exec makes: os/exec closes
// its pipes WaitDelay after the command exits whether or not their
// content was read, and on a loaded machine the reading goroutine may not
// have run by then: the output of a command that exited 0 was lost.
type execOutput struct {
	r, w *os.File
	buf  cappedBuffer  // written by the reading goroutine until done is closed
	done chan struct{} // closed when the reading goroutine returns
}

func newExecOutput() (*execOutput, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &execOutput{r: r, w: w, done: make(chan struct{})}, nil
}

// started closes this process's write end (the command has its own, if it
// started) and starts reading.
func (o *execOutput) started() {
	_ = o.w.Close()
	go func() {
		defer close(o.done)
		_, _ = io.Copy(&o.buf, o.r)
	}()
}

// collect returns the output once every writer has closed the pipe, or
// after limit what has been read and what the pipe holds then; it closes
// the pipe.
func (o *execOutput) collect(limit time.Duration) string {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-o.done:
	case <-t.C:
		_ = o.r.SetReadDeadline(time.Now()) // the reading goroutine returns
		<-o.done
		o.drain()
	}
	_ = o.r.Close()
	return o.buf.String()
}

// drain reads what the pipe holds now, without waiting for more.
func (o *execOutput) drain() {
	if err := o.r.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	rc, err := o.r.SyscallConn()
	if err != nil {
		return
	}
	b := make([]byte, 4096)
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), b)
			if n <= 0 || err != nil { // empty for now (EAGAIN), or every writer gone
				return true
			}
			_, _ = o.buf.Write(b[:n])
		}
	})
}
