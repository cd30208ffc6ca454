package check

import (
	"os/exec"
	"sync"
)

// children records the commands exec probes started and have not yet
// waited for, so that the reaper (StartReaper) reaps every other child of
// the process — orphans it adopted — and never one of these, whose
// cmd.Wait must reap it itself (a child reaped by anyone else makes Wait
// fail). The process has one set of children, so this is one per process,
// shared by every Set.
var children = newChildTable()

// childTable is the set of started commands' pids.
type childTable struct {
	// starting is held for reading while a command starts and its pid is
	// recorded, and for writing while the reaper looks for exited
	// children: the reaper never sees a started command before it is
	// recorded, even one that exits at once.
	starting sync.RWMutex
	mu       sync.Mutex
	tracked  map[int]int // pid → commands started with it, not yet waited for; guarded by mu
	// wake asks the reaper to look again: a recorded command has been
	// waited for, and an exited orphan may have been behind it.
	wake chan struct{}
}

func newChildTable() *childTable {
	return &childTable{tracked: make(map[int]int), wake: make(chan struct{}, 1)}
}

// start starts cmd and records its pid until release is called, which the
// caller does once cmd.Wait has returned.
func (c *childTable) start(cmd *exec.Cmd) (release func(), err error) {
	c.starting.RLock()
	defer c.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	c.mu.Lock()
	c.tracked[pid]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.tracked[pid]--; c.tracked[pid] <= 0 {
			delete(c.tracked, pid)
		}
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}, nil
}

// isTracked reports whether pid is a started command not yet waited for.
func (c *childTable) isTracked(pid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tracked[pid] > 0
}
