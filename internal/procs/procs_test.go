package procs_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/probed/probed/internal/procs"
)

// TestChildrenAndZombies: a child that exited and was not waited for is a
// zombie child of this process; once waited for it is gone.
func TestChildrenAndZombies(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Wait() }()
	for {
		kids, err := procs.Children(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range kids {
			if p.Pid == pid {
				found = true
				if p.State == 'Z' {
					n, err := procs.Zombies(os.Getpid())
					if err != nil || n < 1 {
						t.Fatalf("Zombies() = %d, %v; want at least 1", n, err)
					}
					if err := cmd.Wait(); err != nil {
						t.Fatal(err)
					}
					kids, _ = procs.Children(os.Getpid())
					for _, p := range kids {
						if p.Pid == pid {
							t.Fatalf("child %d still listed after Wait: %+v", pid, p)
						}
					}
					return
				}
			}
		}
		if !found {
			t.Fatalf("child %d not among Children(%d) = %+v", pid, os.Getpid(), kids)
		}
	}
}

// TestListSelf: List reads this process's own stat line: its parent, its
// session (and Session lists it), and a state that is not Z.
func TestListSelf(t *testing.T) {
	all, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Pid == os.Getpid() {
			sid, err := unix.Getsid(0)
			if err != nil {
				t.Fatal(err)
			}
			if p.PPid != os.Getppid() || p.State == 'Z' || p.Session != sid {
				t.Fatalf("self = %+v, want ppid %d, session %d and not a zombie", p, os.Getppid(), sid)
			}
			in, err := procs.Session(sid)
			if err != nil || !slices.ContainsFunc(in, func(q procs.Proc) bool { return q.Pid == p.Pid }) {
				t.Fatalf("Session(%d) = %v, %v; want this process among them", sid, in, err)
			}
			return
		}
	}
	t.Fatal("this process is not listed")
}
