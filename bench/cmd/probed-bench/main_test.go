package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestMain lets the tests run the real parent/child path: when the sched
// command re-executes its binary (here, the test binary) with a hidden
// subcommand, this runs it instead of the tests. After the tests it removes
// the probed they built (shared by several tests, so none of them may).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && isChildCommand(os.Args[1]) {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if probedBinDir != "" {
		_ = os.RemoveAll(probedBinDir)
	}
	os.Exit(code)
}

func TestRunCommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "usage: probed-bench"},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStderr: "sched"},
		{name: "unknown command", args: []string{"nope"}, wantCode: 2, wantStderr: `unknown command "nope"`},
		{name: "bad flag", args: []string{"sched", "--nope"}, wantCode: 2, wantStderr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"sched", "extra"}, wantCode: 2, wantStderr: "unexpected arguments"},
		{name: "command help", args: []string{"sched", "-h"}, wantCode: 0, wantStderr: "-probes"},
		{name: "invalid value", args: []string{"sched", "--probes=0"}, wantCode: 1, wantStderr: "--probes must be positive"},
		{name: "unknown model", args: []string{schedChildCommand, "--model=nope", "--duration=1ms", "--warmup=0s"}, wantCode: 1, wantStderr: `unknown model "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tt.args, &stdout, &stderr); got != tt.wantCode {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestHiddenCommandsAreNotListed(t *testing.T) {
	var stderr bytes.Buffer
	usage(&stderr)
	if strings.Contains(stderr.String(), schedChildCommand) {
		t.Errorf("usage lists the hidden %q:\n%s", schedChildCommand, stderr.String())
	}
}

// TestVersion: --version prints the binary's version on stdout.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := run(context.Background(), []string{"--version"}, &stdout, &stderr); got != 0 || !strings.HasPrefix(stdout.String(), "probed-bench ") {
		t.Errorf("run(--version) = %d, stdout %q, stderr %q; want 0 and probed-bench VERSION", got, stdout.String(), stderr.String())
	}
}
