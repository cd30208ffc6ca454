package main

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/ciskip"
	"github.com/probed/probed/kube/internal/controlplane"
)

// TestDemo runs the demo as `make kube-demo` does until it has reported
// three flips, each reaching the gate and the EndpointSlice, then presses
// Ctrl-C (SIGINT to its process group, as a terminal does): it exits 0
// and every process it started is gone.
func TestDemo(t *testing.T) {
	if _, missing := controlplane.BinDir(); len(missing) > 0 {
		ciskip.Missing(t, "PROBED_REQUIRE_KUBE", "the demo needs the control plane: "+strings.Join(missing, ", ")+" missing (make kube-bins)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "probed-kube-demo")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--flip-every=1s", "--dir="+filepath.Join(dir, "demo"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1024)
	go func() { // ends with the demo's stdout
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out strings.Builder
	pids := map[int]string{}
	pidLine := regexp.MustCompile(`started (\S+) \(pid (\d+)\)`)
	flipLine := regexp.MustCompile(`flip \d+: .*probed\.io/ready=(True|False) after \d.*, EndpointSlice ready=(true|false) after \d`)
	flips := 0
	for flips < 3 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before 3 flips:\n%s\n%s", out.String(), stderr.String())
			}
			out.WriteString(line + "\n")
			if m := pidLine.FindStringSubmatch(line); m != nil {
				pid, _ := strconv.Atoi(m[2])
				pids[pid] = m[1]
			}
			if flipLine.MatchString(line) {
				flips++
			} else if strings.Contains(line, "flip ") {
				t.Errorf("a flip not seen through: %s", line)
			}
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("no 3 flips within 10 min:\n%s\n%s", out.String(), stderr.String())
		}
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "probed", "probed-kube-0", "probed-kube-1"} {
		found := false
		for _, name := range pids {
			found = found || name == want
		}
		if !found {
			t.Errorf("the demo reported no %s process:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "export KUBECONFIG=") {
		t.Errorf("no KUBECONFIG line:\n%s", out.String())
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	go func() {
		for line := range lines {
			out.WriteString(line + "\n")
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after Ctrl-C: %v\n%s\n%s", err, out.String(), stderr.String())
		}
	case <-time.After(2 * time.Minute): // each process is given 15 s at most
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("still running 2 min after Ctrl-C:\n%s", out.String())
	}
	for pid, name := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) is still there after the demo exited: %v", name, pid, err)
		}
	}
	if !strings.Contains(out.String(), "stopped: every process the demo started has exited") {
		t.Errorf("no stop message:\n%s", out.String())
	}
}
