package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTestListsSkips runs `make test` with a stand-in for go that
// skips one test the way ciskip.Missing does: make test ends by listing
// it, and keeps go's exit status.
func TestMakeTestListsSkips(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	for _, tt := range []struct {
		name     string
		exit     string
		wantCode int
	}{
		{"passing", "0", 0},
		{"failing", "3", 2}, // make's own status for a failed recipe
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fakeGo, report := filepath.Join(dir, "go"), filepath.Join(dir, "skipped")
			script := "#!/bin/sh\necho 'TestX: chromium is missing (required in CI)' >> \"$PROBED_SKIP_REPORT\"\nexit " + tt.exit + "\n"
			if err := os.WriteFile(fakeGo, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("make", "--no-print-directory", "test", "GO="+fakeGo, "SKIP_REPORT="+report)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(string(out), "SKIPPED here, required in CI:\n  TestX: chromium is missing (required in CI)\n") {
				t.Errorf("make test: exit %d, output:\n%s\nwant exit %d and the skipped test listed", code, out, tt.wantCode)
			}
			if _, err := os.Stat(report); err == nil {
				t.Error("make test left its skip report behind")
			}
		})
	}
}
