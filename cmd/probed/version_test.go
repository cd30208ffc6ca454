package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag: --version asks for the version line (main prints it on
// standard output) and starts nothing.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	cfg, err := parseFlags([]string{"--version"}, &out)
	if !errors.Is(err, errVersion) || cfg != nil || out.Len() != 0 {
		t.Fatalf("parseFlags(--version) = %v, %v, printed %q; want errVersion and nothing printed", cfg, err, out.String())
	}
	if f := strings.Fields(versionLine()); len(f) != 3 || f[0] != "probed" || !strings.HasPrefix(f[2], "go") {
		t.Errorf("versionLine() = %q, want probed VERSION GOVERSION", versionLine())
	}
}

// TestVersionStamped builds probed and probectl as make build does, with
// -ldflags "-X main.version=...", and runs their --version.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	const stamp = "v0.9.9-test"
	dir := t.TempDir()
	for _, cmd := range []string{"probed", "probectl"} {
		bin := filepath.Join(dir, cmd)
		build := exec.Command("go", "build", "-ldflags", "-X main.version="+stamp, "-o", bin, "./cmd/"+cmd)
		build.Dir = "../.."
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", cmd, err, out)
		}
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", cmd, err)
		}
		if !strings.HasPrefix(string(out), cmd+" "+stamp+" go") {
			t.Errorf("%s --version printed %q, want %q", cmd, out, cmd+" "+stamp+" GOVERSION")
		}
	}
}
