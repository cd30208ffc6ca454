// Package clients holds probed's clients in other languages (node/,
// python/); this test runs each against a real probed.
package clients_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/internal/ciskip"
	"github.com/probed/probed/internal/probedtest"
)

// requireEnv makes a missing interpreter or package a failure instead of
// a skip (CI sets it, .ci/run).
const requireEnv = "PROBED_REQUIRE_EXAMPLES"

// wantOutput is what every example prints: the target created, its
// readiness transition, and the three field violations of the bad spec.
var wantOutput = regexp.MustCompile(`^created target from-(node|python) \(revision \d+\)
from-(node|python): readiness failure→success, ready=true
bad spec rejected: INVALID_ARGUMENT
  target\.readinessProbe\.tcpSocket\.port: Required value: a port between 1 and 65535 is required
  target\.readinessProbe\.timeoutMilliseconds: Invalid value: 1000: must be greater than -1000 and less than 1000
  target\.readinessProbe\.periodMilliseconds: Invalid value: -950: effective period periodSeconds 1 \+ periodMilliseconds -950 = 50ms must be at least 100ms \(the server's --min-period\)
deleted target from-(node|python)
$`)

func TestNode(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		ciskip.Missing(t, requireEnv, "node is not installed (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "@grpc", "grpc-js")); err != nil {
		ciskip.Missing(t, requireEnv, "the Node example's packages are not installed (npm ci --prefix examples/clients/node)")
	}
	runExample(t, node, filepath.Join("node", "example.js"))
}

func TestPython(t *testing.T) {
	t.Parallel()
	// proto3 optional needs protoc 3.15 or later (Debian 12 has 3.21).
	v, err := exec.Command("protoc", "--version").Output()
	if err != nil {
		ciskip.Missing(t, requireEnv, "protoc is not installed (apt-get install protobuf-compiler: 3.15 or later)")
	}
	if m := regexp.MustCompile(`(\d+)\.(\d+)`).FindStringSubmatch(string(v)); m == nil || atoi(m[1]) < 3 || (atoi(m[1]) == 3 && atoi(m[2]) < 15) {
		ciskip.Missing(t, requireEnv, "protoc is older than 3.15 ("+strings.TrimSpace(string(v))+"): it rejects proto3 optional")
	}
	// The first python3 that has Debian's grpcio and protobuf (a python3
	// of pyenv or a virtualenv earlier in PATH may not).
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import grpc, google.protobuf").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		ciskip.Missing(t, requireEnv, "no python3 with grpc and protobuf (apt-get install python3-grpcio python3-protobuf)")
	}
	runExample(t, python, filepath.Join("python", "example.py"))
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// runExample runs the example script with interpreter against a fresh
// probed and checks what it prints.
func runExample(t *testing.T, interpreter, script string) {
	t.Helper()
	s := probedtest.Start(t, probedtest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script, s.Addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", interpreter, script, err, out, stderr.String())
	}
	if !wantOutput.Match(out) {
		t.Errorf("%s printed:\n%s\nwant:\n%s", script, out, wantOutput)
	}
}
