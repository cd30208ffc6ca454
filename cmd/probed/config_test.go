package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "gates", args: []string{"--feature-gates=SubSecondProbes=false,PodLifecycleSleepActionAllowZero=false"}},
		{name: "unknown gate", args: []string{"--feature-gates=SubSecondProbe=true"}, wantErr: `unrecognized feature gate "SubSecondProbe"`},
		{name: "bad gate value", args: []string{"--feature-gates=SubSecondProbes=maybe"}, wantErr: `invalid value "maybe"`},
		{name: "bad log level", args: []string{"--log-level=loud"}, wantErr: "--log-level"},
		{name: "bad log format", args: []string{"--log-format=xml"}, wantErr: "--log-format"},
		{name: "zero floor", args: []string{"--min-period=0s"}, wantErr: "--min-period"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected arguments: serve"},
		{name: "gRPC probes per probe", args: []string{"--grpc-probe-connections=per-probe"}},
		{name: "bad gRPC probe connections", args: []string{"--grpc-probe-connections=pooled"}, wantErr: "--grpc-probe-connections"},
		{name: "telemetry all set", args: []string{"--metrics-addr=127.0.0.1:9999", "--metrics-target-label", "--trace-ratio=0.5", "--trace-propagate", "--pprof"}},
		{name: "pprof without a metrics listener", args: []string{"--metrics-addr=", "--pprof"}, wantErr: "--pprof"},
		{name: "metrics off", args: []string{"--metrics-addr="}},
		{name: "trace ratio above 1", args: []string{"--trace-ratio=1.5"}, wantErr: "--trace-ratio"},
		{name: "negative trace ratio", args: []string{"--trace-ratio=-0.1"}, wantErr: "--trace-ratio"},
		{name: "metrics address without port", args: []string{"--metrics-addr=localhost"}, wantErr: "--metrics-addr"},
		{name: "timeline window", args: []string{"--ui-addr=127.0.0.1:0", "--ui-timeline=15m"}},
		{name: "no timeline window", args: []string{"--ui-timeline=0s"}, wantErr: "--ui-timeline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr == "" {
				if err != nil || cfg == nil {
					t.Fatalf("parseFlags(%v) = %v", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("parseFlags(%v) error = %v, want it to contain %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestFlagErrorsAreOneMessage: a bad flag value is its message and one
// line pointing to --help, not the whole usage; --help prints the usage.
func TestFlagErrorsAreOneMessage(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	_, err := parseFlags([]string{"--min-period", "soon"}, &out)
	if err == nil || out.Len() != 0 {
		t.Fatalf("parseFlags(--min-period soon) = %v, printed %q; want an error and nothing printed", err, out.String())
	}
	printFlagError(&out, err)
	want := "probed: invalid value \"soon\" for flag -min-period: parse error\nRun 'probed --help' for the flags.\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}

	out.Reset()
	if _, err := parseFlags([]string{"--help"}, &out); !errors.Is(err, errHelp) || !strings.Contains(out.String(), "-ui-addr") {
		t.Errorf("parseFlags(--help) = %v, printed %q; want errHelp and the usage", err, out.String())
	}
}

func TestSecondServerOnTheSameDataDirFailsFast(t *testing.T) {
	cfg := testConfig(t)
	startServer(t, cfg)
	second := *cfg
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := serve(ctx, &second, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another probed process") {
		t.Fatalf("second server: %v, want it to refuse the locked data dir", err)
	}
}
