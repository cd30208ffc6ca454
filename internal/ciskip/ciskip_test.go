package ciskip

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMissingReports: a skip is written to the report file, one line
// naming the test, what is missing and the variable that requires it.
func TestMissingReports(t *testing.T) {
	report := filepath.Join(t.TempDir(), "skipped")
	t.Setenv(ReportEnv, report)
	t.Setenv("CI", "")
	t.Setenv("PROBED_REQUIRE_THING", "")
	t.Run("needs thing", func(t *testing.T) {
		Missing(t, "PROBED_REQUIRE_THING", "thing is not installed (apt-get install thing)")
		t.Error("Missing did not skip")
	})
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	want := "TestMissingReports/needs_thing: thing is not installed (apt-get install thing) (required in CI; PROBED_REQUIRE_THING=1 requires it here)\n"
	if string(b) != want {
		t.Errorf("report %q, want %q", b, want)
	}
}

func TestRequired(t *testing.T) {
	for _, tt := range []struct {
		ci, env string
		want    bool
	}{
		{"", "", false},
		{"true", "", true},
		{"", "1", true},
		{"false", "0", false},
	} {
		t.Setenv("CI", tt.ci)
		t.Setenv("PROBED_REQUIRE_THING", tt.env)
		if got := Required("PROBED_REQUIRE_THING"); got != tt.want {
			t.Errorf("CI=%q PROBED_REQUIRE_THING=%q: Required = %v, want %v", tt.ci, tt.env, got, tt.want)
		}
	}
}
