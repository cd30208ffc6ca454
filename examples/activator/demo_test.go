package activator_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/internal/procs"
	"github.com/probed/probed/internal/refused"
)

// TestDemo runs make demo's script on reserved ports: it prints where
// probed, its status page, the fake pod and the activator are; the status
// page serves; a request held through the activator reaches the fake pod;
// Ctrl-C stops everything it started.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo's four programs")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the demo needs %s", tool)
		}
	}
	// The script first builds four programs: from a cold build cache on a
	// loaded 2-core machine that alone took most of the 3 minutes this
	// test once had for everything (a stress run killed the demo while it
	// was stopping). The build has its own bound; the demo, from its
	// banner on, has 2 minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	demo := time.NewTimer(15 * time.Minute) // reset at the banner
	defer demo.Stop()
	began := time.Now()
	ui := refused.Reserve(t).Addr()
	cmd := exec.CommandContext(ctx, "bash", "demo.sh")
	cmd.Env = append(os.Environ(),
		"PROBED_ADDR="+refused.Reserve(t).Addr(),
		"POD_ADDR="+refused.Reserve(t).Addr(),
		"ACTIVATOR_ADDR="+refused.Reserve(t).Addr(),
		"UI_ADDR="+ui,
		"FLAP=2s",
	)
	// SIGINT stops the script and the jobs it starts, as Ctrl-C does. The
	// script leads a session of its own: its jobs, each in a process group
	// of its own (set -m), stay in that session, so that whatever is left
	// of it (the test timed out, or the script did not stop them) is
	// killed when the test ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, err := procs.Session(cmd.Process.Pid)
		if err != nil {
			t.Errorf("the demo's processes: %v", err)
		}
		for _, p := range left {
			if p.State != 'Z' {
				t.Errorf("process %d of the demo still runs after the test; killed", p.Pid)
				_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			}
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	var out strings.Builder
	pageURL := ""
	reached := false
	for !reached {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended early: %v\n%s\nstderr:\n%s", cmd.Wait(), out.String(), stderr.String())
			}
			out.WriteString(line + "\n")
			if strings.HasPrefix(line, "probed ") { // the banner: the build is done
				demo.Reset(2 * time.Minute)
				t.Logf("built and started in %v", time.Since(began))
			}
			if strings.HasPrefix(line, "status page http://"+ui+"/ ") {
				pageURL = "http://" + ui + "/"
			}
			// The activator held the request until the pod was ready, then
			// forwarded it (the pod answers "Hello from hello!").
			reached = strings.HasPrefix(line, "request through the activator: Hello from hello!")
		case <-demo.C:
			t.Fatalf("no request reached the pod through the activator within 2 minutes of the banner:\n%s\nstderr:\n%s", out.String(), stderr.String())
		case <-ctx.Done():
			t.Fatalf("the demo did not build and start within 15 minutes:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	}
	if pageURL == "" {
		t.Fatalf("the demo did not print the status page's URL http://%s/:\n%s", ui, out.String())
	}
	resp, err := http.Get(pageURL)
	if err != nil {
		t.Fatalf("GET %s: %v", pageURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "probed") {
		t.Errorf("GET %s: %d %.100s, want the status page", pageURL, resp.StatusCode, body)
	}

	t.Logf("a request reached the pod after %v", time.Since(began))
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stopping := time.Now()
	for line := range lines { // until every job holding stdout is gone
		out.WriteString(line + "\n")
	}
	// Exit status 0: Ctrl-C is how the demo ends, and make then reports
	// no "Error 130".
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the demo did not stop cleanly on SIGINT (%v after it): %v\n%s\nstderr:\n%s", time.Since(stopping), err, out.String(), stderr.String())
	}
	t.Logf("stopped %v after SIGINT", time.Since(stopping))
	if !strings.Contains(out.String(), "demo stopped") {
		t.Errorf("after Ctrl-C the output lacks \"demo stopped\":\n%s", out.String())
	}
	if resp, err := http.Get(pageURL); err == nil {
		resp.Body.Close()
		t.Errorf("the status page still serves after Ctrl-C")
	}
}
