package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reaper is the process's one reaper goroutine, shared by the callers of
// StartReaper.
var reaper struct {
	mu     sync.Mutex
	users  int                // StartReaper calls not yet stopped; guarded by mu
	cancel context.CancelFunc // ends the goroutine; guarded by mu
	done   chan struct{}      // closed when it has ended; guarded by mu
}

// StartReaper makes the process a child subreaper (prctl
// PR_SET_CHILD_SUBREAPER), so that the processes exec probes leave
// behind — a background child of a command that exited, the children of
// a command killed at its timeout — are re-parented to it rather than to
// the machine's init, and reaps each of them when it exits (on SIGCHLD),
// as an init does. Without it a probed running as PID 1 (in a container)
// accumulates them as zombies. It never reaps a command an exec probe
// started and is waiting for (see children).
//
// There is one reaper per process: StartReaper starts it, or counts one
// more user of the running one. Call stop when done; the last stop ends
// it (the process is no longer a subreaper) and waits for it.
func StartReaper(log *slog.Logger) (stop func(), err error) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.users == 0 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("becoming a child subreaper: %w", err)
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, unix.SIGCHLD)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		reaper.cancel, reaper.done = cancel, done
		go func() {
			defer close(done)
			defer signal.Stop(sig)
			reapUntil(ctx, sig, log)
		}()
	}
	reaper.users++
	var once sync.Once
	return func() { once.Do(stopReaper) }, nil
}

// stopReaper ends the reaper once its last user stops it.
func stopReaper() {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.users--; reaper.users > 0 {
		return
	}
	reaper.cancel()
	<-reaper.done
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
}

// reapUntil reaps exited children at start, on each SIGCHLD and when a
// started command has been waited for, until ctx is done.
func reapUntil(ctx context.Context, sig <-chan os.Signal, log *slog.Logger) {
	for {
		if n := children.reap(); n > 0 && log != nil {
			log.Debug("reaped processes left by exec probes", "processes", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-children.wake:
		}
	}
}

// reap reaps every exited child of the process that is not a started
// command (whose cmd.Wait reaps it), and returns how many. It looks at an
// exited child without reaping it (waitid WNOWAIT), then reaps that one
// pid (wait4); it stops at a started command, and looks again when that
// command has been waited for (wake).
func (c *childTable) reap() int {
	c.starting.Lock()
	defer c.starting.Unlock()
	n := 0
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		pid := siginfoPid(&info)
		if err != nil || pid <= 0 || c.isTracked(pid) {
			return n // no child, none exited, or one its Wait reaps
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return n
		}
		n++
	}
}

// siginfoPid returns si_pid of a siginfo_t filled by waitid: the first int
// of its union, which follows three ints and is aligned like a pointer.
func siginfoPid(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	off := (3*unsafe.Sizeof(int32(0)) + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
