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
