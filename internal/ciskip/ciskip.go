// Package ciskip skips a test whose prerequisites (a browser, an
// interpreter, packages from npm or Debian) are missing on this machine —
// but fails it where CI requires it — and makes the skip visible: `go test`
// prints nothing of a passing package, so a skipped test that CI requires
// is also written to the file PROBED_SKIP_REPORT names, which `make test`
// prints at the end.
package ciskip

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// ReportEnv names the file skipped tests are appended to, one line each.
const ReportEnv = "PROBED_SKIP_REPORT"

// Required reports whether the environment requires the tests guarded by
// env: CI=true, or env=1 (e.g. PROBED_REQUIRE_BROWSER=1).
func Required(env string) bool {
	return os.Getenv("CI") == "true" || os.Getenv(env) == "1"
}

// Missing skips t because of what is missing (with how to install it), or
// fails it when Required(env).
func Missing(t testing.TB, env, what string) {
	t.Helper()
	if Required(env) {
		t.Fatalf("%s: %s; required here (CI=true or %s=1)", t.Name(), what, env)
	}
	report(fmt.Sprintf("%s: %s (required in CI; %s=1 requires it here)", t.Name(), what, env))
	t.Skip(what)
}

var mu sync.Mutex

// report appends line to the PROBED_SKIP_REPORT file, if one is named.
func report(line string) {
	path := os.Getenv(ReportEnv)
	if path == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintln(f, line)
	_ = f.Close()
}
