package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probed/probed/engine/feature"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "probed.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFile: a YAML file whose keys are the flags' names sets them,
// whichever file of this package registered them; a flag on the command
// line wins over the file, in any order.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `# every kind of value
addr: 127.0.0.1:0
min-period: 50ms             # a duration
history: 5000                # a number
allow-exec: true             # a boolean
trace-ratio: 0.25            # a float
ui-timeline: 15m             # registered by ui.go
allow-targets: [10.0.0.0/8, 192.168.0.0/16]   # a list: comma-separated
feature-gates: {SubSecondProbes: false}       # a map: key=value pairs
metrics-addr: 127.0.0.1:1234
`)
	cfg, err := parseFlags([]string{"--metrics-addr", "", "--config", path, "--history=7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"min-period", cfg.minPeriod, 50 * time.Millisecond},
		{"history (command line)", cfg.history, 7},
		{"allow-exec", cfg.allowExec, true},
		{"trace-ratio", cfg.telemetry.traceRatio, 0.25},
		{"ui-timeline", cfg.ui.timeline, 15 * time.Minute},
		{"allow-targets", cfg.security.allowTargets.String(), "10.0.0.0/8,192.168.0.0/16"},
		{"SubSecondProbes", cfg.gates.Enabled(feature.SubSecondProbes), false},
		{"metrics-addr (command line, empty)", cfg.telemetry.metricsAddr, ""},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestConfigFileErrors: every problem of a file is reported with the file
// and the key.
func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, content string
		wantErr       []string
	}{
		{"unknown keys", "metric-addr: x\nhistroy: 5\n", []string{`"histroy" is not a flag of probed; did you mean "history"?`, `"metric-addr" is not a flag of probed; did you mean "metrics-addr"?`}},
		{"bad value", "min-period: soon\n", []string{"min-period: parse error"}},
		{"not for a file", "version: true\nconfig: other.yaml\n", []string{`"config" is not a flag`, `"version" is not a flag`}},
		{"not a map", "- addr\n", []string{"want a map of flag names to values"}},
		{"invalid once set", "min-period: 0s\n", []string{"--min-period 0s: must be positive"}},
		{"a key twice", "addr: 127.0.0.1:1\nhistory: 5\naddr: 127.0.0.1:2\n", []string{`line 3: key "addr" given twice`}},
		{"a map key twice", "feature-gates: {SubSecondProbes: true, SubSecondProbes: false}\n", []string{`key "SubSecondProbes" given twice`}},
		{"an empty deny list", "deny-targets: []\n", []string{"deny-targets: would deny nothing", "--deny-targets=none"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tt.content)
			_, err := parseFlags([]string{"--config", path}, io.Discard)
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("parseFlags(--config) = %v, want an error containing %q", err, w)
				}
			}
		})
	}
	if _, err := parseFlags([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, io.Discard); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v, want an error", err)
	}
}

// TestPrintConfig: --print-config prints every flag's effective value as
// a file --config reads back to the same configuration.
func TestPrintConfig(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "history: 5000\nfeature-gates: {SubSecondProbes: false}\nallow-targets: [10.0.0.0/8]\n")
	cfg, err := parseFlags([]string{"--config", path, "--tick", "2ms", "--print-config"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	printed := string(cfg.printConfig)
	for _, want := range []string{"\nhistory: 5000\n", "\ntick: 2ms\n", "\nallow-exec: false\n", "\nfeature-gates: PodLifecycleSleepActionAllowZero=true,SubSecondProbes=false\n", "\nui-timeline: 5m0s\n", "\nallow-targets: 10.0.0.0/8\n"} {
		if !strings.Contains(printed, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, printed)
		}
	}
	for _, not := range []string{"print-config:", "\nconfig:", "version:"} {
		if strings.Contains(printed, not) {
			t.Errorf("--print-config prints %q:\n%s", not, printed)
		}
	}
	again, err := parseFlags([]string{"--config", writeConfig(t, printed), "--print-config"}, io.Discard)
	if err != nil {
		t.Fatalf("--config of the printed configuration: %v", err)
	}
	if string(again.printConfig) != printed {
		t.Errorf("the printed configuration read back prints\n%s\nwant\n%s", again.printConfig, printed)
	}
	if plain, err := parseFlags(nil, io.Discard); err != nil || plain.printConfig != nil {
		t.Errorf("without --print-config: %v, printConfig %q; want none", err, plain.printConfig)
	}
}
