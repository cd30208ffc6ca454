// Package procs is about processes: it lists those of the machine from
// /proc (for tests that count what a process leaves behind: zombies,
// orphans), reads what one has used (CPU time, resident memory), and runs
// a child process until it is stopped and waited for (Child).
package procs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Proc is one process as /proc/<pid>/stat shows it.
type Proc struct {
	Pid, PPid int
	// State is the state letter: R running, S sleeping, Z zombie, ...
	State byte
	// Session is the session id: the pid of the session's leader (setsid).
	Session int
}

// List returns every process visible in /proc. Processes that end while
// it reads are left out.
func List() ([]Proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		p, err := parseStat(pid, b)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// parseStat reads "pid (comm) state ppid pgrp session ...".
func parseStat(pid int, b []byte) (Proc, error) {
	f, err := statFields(b, 4)
	if err != nil || len(f[0]) != 1 {
		return Proc{}, fmt.Errorf("/proc/%d/stat: malformed: %q", pid, b)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	session, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: session: %w", pid, err)
	}
	return Proc{Pid: pid, PPid: ppid, State: f[0][0], Session: session}, nil
}

// Session returns the processes of session sid (its leader included).
func Session(sid int) ([]Proc, error) {
	return listWhere(func(p Proc) bool { return p.Session == sid })
}

// Children returns the processes whose parent is ppid.
func Children(ppid int) ([]Proc, error) {
	return listWhere(func(p Proc) bool { return p.PPid == ppid })
}

// listWhere returns the processes List returns that keep accepts.
func listWhere(keep func(Proc) bool) ([]Proc, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(p Proc) bool { return !keep(p) }), nil
}

// Zombies returns how many children of ppid are zombies (exited, not yet
// reaped).
func Zombies(ppid int) (int, error) {
	kids, err := Children(ppid)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range kids {
		if p.State == 'Z' {
			n++
		}
	}
	return n, nil
}
