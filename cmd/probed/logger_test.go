package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestLogDurationsSayTheirUnit: a duration reads the same in text and
// JSON logs, with its unit, also inside a group.
func TestLogDurationsSayTheirUnit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		format string
		want   []string
	}{
		{"text", []string{"latency=1.2ms", "probe.timeout=1s"}},
		{"json", []string{`"latency":"1.2ms"`, `"probe":{"timeout":"1s"}`}},
	} {
		t.Run(tt.format, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseFlags([]string{"--log-format", tt.format}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			newLoggerTo(&b, cfg).Info("probe transition", "latency", 1200*time.Microsecond, "probe", map[string]any{"x": 1}, "n", 3)
			newLoggerTo(&b, cfg).WithGroup("probe").Info("run", "timeout", time.Second)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("log %q lacks %q", b.String(), w)
				}
			}
			if tt.format == "json" {
				for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
					if !json.Valid([]byte(line)) {
						t.Errorf("not JSON: %s", line)
					}
				}
			}
		})
	}
}
