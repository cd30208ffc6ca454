package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped wins", "v0.1.0-3-gabc1234", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.9"}}, "v0.1.0-3-gabc1234"},
		{"stamped with a newline", "v0.1.0\n", nil, "v0.1.0"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.2.0"},
		{"dev stamp falls back", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.2.0"},
		{"devel: revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "0123456789ab"},
		{"devel: dirty revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "0123456789ab-dirty"},
		{"devel, no vcs (-buildvcs=false)", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build information", "", nil, "dev"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := version(tt.stamped, tt.bi); got != tt.want {
				t.Errorf("version(%q) = %q, want %q", tt.stamped, got, tt.want)
			}
		})
	}
}

// TestVersionOfTestBinary: a test binary has build information, so the
// result is never empty.
func TestVersionOfTestBinary(t *testing.T) {
	if got := Version(""); got == "" {
		t.Error(`Version("") is empty`)
	}
	if got := GoVersion(); got == "dev" || got == "" {
		t.Errorf("GoVersion() = %q, want the Go release", got)
	}
}
