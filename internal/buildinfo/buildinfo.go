// Package buildinfo says which build of probed is running, for the
// --version of every binary, the probed_build_info metric and the status
// page.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// unknown is the version of a build that recorded none.
const unknown = "dev"

// Version returns the version of the running binary. stamped is what the
// build set with -ldflags "-X main.version=..." (make build stamps `git
// describe --tags --always --dirty`, e.g. v0.1.0 or v0.1.0-3-gabc1234);
// when it is empty or "dev", Version returns what go build recorded: the
// main module's version (`go install ...@v0.1.0`, or the one Go derives
// from a git tag), else the VCS revision (first 12 hex digits, "-dirty"
// with uncommitted changes), else "dev".
func Version(stamped string) string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return version(stamped, bi)
}

// version is Version with the build information given (nil: none).
func version(stamped string, bi *debug.BuildInfo) string {
	if stamped = strings.TrimSpace(stamped); stamped != "" && stamped != unknown {
		return stamped
	}
	if bi == nil {
		return unknown
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return unknown
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		revision += "-dirty"
	}
	return revision
}

// GoVersion is the Go release that built the binary, e.g. go1.26.8.
func GoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.GoVersion != "" {
		return bi.GoVersion
	}
	return unknown
}
