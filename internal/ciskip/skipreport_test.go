package ciskip

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// skipReport is the script `make test` and `make test-kube` run their go
// test commands through, from this package's directory.
const skipReport = "../../.ci/skipreport"

// TestSkipReportListsSkips runs .ci/skipreport with commands that stand
// in for go test: a skip written to PROBED_SKIP_REPORT (as Missing does)
// is listed at the end, every command runs, the exit status says whether
// one failed, and the report file is gone afterwards.
func TestSkipReportListsSkips(t *testing.T) {
	t.Parallel()
	const skip = `echo 'TestX: chromium is missing (required in CI)' >>"$PROBED_SKIP_REPORT"`
	const listed = "SKIPPED here, required in CI:\n  TestX: chromium is missing (required in CI)\n"
	for _, tt := range []struct {
		name       string
		commands   []string // %s is a file each command appends its name to
		wantCode   int
		wantListed bool
		wantRan    string
	}{
		{"a skip", []string{skip + "; echo a >>%s"}, 0, true, "a\n"},
		{"no skip", []string{"echo a >>%s"}, 0, false, "a\n"},
		{"a failure, then a skip", []string{"echo a >>%s; exit 3", skip + "; echo b >>%s"}, 1, true, "a\nb\n"},
		{"a skip, then a failure", []string{skip + "; echo a >>%s", "echo b >>%s; exit 2"}, 1, true, "a\nb\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ran, where := filepath.Join(dir, "ran"), filepath.Join(dir, "report-path")
			args := []string{`echo "$PROBED_SKIP_REPORT" >` + where}
			for _, c := range tt.commands {
				args = append(args, strings.ReplaceAll(c, "%s", ran))
			}
			out, err := exec.Command(skipReport, args...).CombinedOutput()
			code := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || strings.Contains(string(out), listed) != tt.wantListed {
				t.Errorf("skipreport: exit %d, output:\n%s\nwant exit %d, the skip listed: %v", code, out, tt.wantCode, tt.wantListed)
			}
			if b, err := os.ReadFile(ran); err != nil || string(b) != tt.wantRan {
				t.Errorf("commands that ran: %q (%v), want %q", b, err, tt.wantRan)
			}
			b, err := os.ReadFile(where)
			if err != nil {
				t.Fatal(err)
			}
			if report := strings.TrimSpace(string(b)); report == "" {
				t.Error("PROBED_SKIP_REPORT was not set for the commands")
			} else if _, err := os.Stat(report); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the report %s is left behind (%v)", report, err)
			}
		})
	}
}

// TestMakeTestTargets reads what `make -n` would run (it runs nothing):
// make test and make test-kube run go test through .ci/skipreport, and
// make test runs nothing of the Kubernetes module or its control plane.
func TestMakeTestTargets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		target   string
		want     []string
		mustNot  []string
		becauseN string
	}{
		{"test", []string{"./.ci/skipreport", "go test -race", "./...", "cd bench"}, []string{"kube"}, "the product's tests only"},
		{"test-kube", []string{"./.ci/skipreport", "cd kube && PROBED_REQUIRE_KUBE=1", "build.sh"}, nil, "the control plane's tests"},
		{"check", []string{"cd bench", "cd kube && PROBED_REQUIRE_KUBE=1"}, nil, "both"},
	} {
		cmd := exec.Command("make", "-n", "--no-print-directory", tt.target, "GO=go")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n %s: %v", tt.target, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("make -n %s does not run %q (%s):\n%s", tt.target, w, tt.becauseN, out)
			}
		}
		for _, w := range tt.mustNot {
			if strings.Contains(string(out), w) {
				t.Errorf("make -n %s runs %q (%s):\n%s", tt.target, w, tt.becauseN, out)
			}
		}
	}
}
