package main

import (
	"encoding/json"
	"io"
	"slices"
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

// TestAnnouncedAtEveryLevel: a record logged with an announcing context
// (the serving line) is written at every --log-level, in both formats,
// through WithAttrs and WithGroup too; the others follow the level.
func TestAnnouncedAtEveryLevel(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"debug", "info", "warn", "error"} {
		for _, format := range []string{"text", "json"} {
			t.Run(level+"/"+format, func(t *testing.T) {
				t.Parallel()
				cfg, err := parseFlags([]string{"--log-level", level, "--log-format", format}, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				log := newLoggerTo(&b, cfg)
				ctx := t.Context()
				log.InfoContext(announcing(ctx), "announced")
				log.With("k", "v").WithGroup("g").InfoContext(announcing(ctx), "announced-with")
				log.InfoContext(ctx, "plain-info")
				log.DebugContext(ctx, "plain-debug")
				log.WarnContext(ctx, "plain-warn")
				want := map[string]bool{
					"announced":      true,
					"announced-with": true,
					"plain-info":     level == "debug" || level == "info",
					"plain-debug":    level == "debug",
					"plain-warn":     level != "error",
				}
				got := map[string]bool{}
				for line := range strings.Lines(b.String()) {
					for msg := range want {
						if slices.Contains(strings.Fields(line), "msg="+msg) || strings.Contains(line, `"msg":"`+msg+`"`) {
							got[msg] = true
							if strings.Contains(msg, "announced") && !strings.Contains(line, "INFO") {
								t.Errorf("%s is not at level INFO: %s", msg, line)
							}
						}
					}
				}
				for msg, w := range want {
					if got[msg] != w {
						t.Errorf("%s written = %v, want %v; log:\n%s", msg, got[msg], w, b.String())
					}
				}
			})
		}
	}
}
