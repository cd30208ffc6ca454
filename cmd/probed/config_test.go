package main

import (
	"context"
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
		{name: "telemetry all set", args: []string{"--metrics-addr=:9999", "--metrics-target-label", "--trace-ratio=0.5", "--trace-propagate", "--pprof"}},
		{name: "pprof without a metrics listener", args: []string{"--metrics-addr=", "--pprof"}, wantErr: "--pprof"},
		{name: "metrics off", args: []string{"--metrics-addr="}},
		{name: "trace ratio above 1", args: []string{"--trace-ratio=1.5"}, wantErr: "--trace-ratio"},
		{name: "negative trace ratio", args: []string{"--trace-ratio=-0.1"}, wantErr: "--trace-ratio"},
		{name: "metrics address without port", args: []string{"--metrics-addr=localhost"}, wantErr: "--metrics-addr"},
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
