package procs_test

import (
	"os"
	"os/exec"
	"testing"

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

// TestListSelf: List reads this process's own stat line: its parent, and
// a state that is not Z.
func TestListSelf(t *testing.T) {
	all, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Pid == os.Getpid() {
			if p.PPid != os.Getppid() || p.State == 'Z' {
				t.Fatalf("self = %+v, want ppid %d and not a zombie", p, os.Getppid())
			}
			return
		}
	}
	t.Fatal("this process is not listed")
}
