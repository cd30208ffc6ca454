package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServer runs serve with cfg until the test ends and returns its
// address.
func startServer(t *testing.T, cfg *config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan struct{}) // closed when serve has returned serveErr
	var serveErr error
	go func() {
		defer close(done)
		serveErr = serve(ctx, cfg, func(a net.Addr) { addr <- a })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	})
	select {
	case a := <-addr:
		return a.String()
	case <-done:
		t.Fatalf("serve returned before serving: %v", serveErr)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not start within 30s")
	}
	return ""
}

func testConfig(t *testing.T, args ...string) *config {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn"}, args...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// moduleRoot is where `go tool -modfile=tools/go.mod` works.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// readmeSession returns the commands and expected output lines of the
// README's grpcurl session.
func readmeSession(t *testing.T, root string) (cmds []string, outputs [][]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- grpcurl-session -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /grpcurl-session -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no grpcurl-session block")
	}
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "$ "):
			cmds = append(cmds, strings.TrimPrefix(line, "$ "))
			outputs = append(outputs, nil)
		case strings.HasPrefix(line, "```"), line == "":
		case len(cmds) > 0:
			outputs[len(outputs)-1] = append(outputs[len(outputs)-1], line)
		}
	}
	return cmds, outputs
}

// TestREADMEGrpcurlSession runs the README's grpcurl session verbatim
// (only the address and port differ) against the real server.
func TestREADMEGrpcurlSession(t *testing.T) {
	root := moduleRoot(t)
	addr := startServer(t, testConfig(t))
	cmds, outputs := readmeSession(t, root)
	if len(cmds) < 4 {
		t.Fatalf("README session has %d commands, want at least 4", len(cmds))
	}
	_, port, _ := net.SplitHostPort(addr)
	var all strings.Builder
	for i, c := range cmds {
		c = strings.ReplaceAll(c, "127.0.0.1:50051", addr)
		c = strings.ReplaceAll(c, `"port": 50051`, `"port": `+port)
		cmd := exec.Command("sh", "-c", c)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		all.Write(out)
		streaming := strings.Contains(c, "/Watch")
		if err != nil && (!streaming || !strings.Contains(string(out), "DeadlineExceeded")) {
			t.Fatalf("command %d failed: %v\n%s\n%s", i, err, c, out)
		}
		for _, want := range outputs[i] {
			if !strings.Contains(string(out), want) {
				t.Errorf("command %d: output lacks the README's line %q:\n%s", i, want, out)
			}
		}
		if i == 1 {
			time.Sleep(300 * time.Millisecond) // let a few 100ms probes run
		}
	}
	for _, want := range []string{
		`"period": "0.100s"`,           // 1s - 900ms, what the README promises
		`"result": "RESULT_SUCCESS"`,   // probed probing its own port
		`"kind": "EVENT_KIND_CREATED"`, // the Watch replay
		`"kind": "EVENT_KIND_TRANSITION"`,
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("session output lacks %s:\n%s", want, all.String())
		}
	}
}
