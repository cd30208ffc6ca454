package main

import (
	"io"
	"log/slog"
)

// newLoggerTo returns the logger --log-level and --log-format ask for,
// writing to w. Durations read the same in both formats, in Go's notation
// with their unit ("latency=1.2ms", "latency":"1.2ms"), never as a bare
// count of nanoseconds.
func newLoggerTo(w io.Writer, cfg *config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logFormat == "json" {
		opts.ReplaceAttr = durationString
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString writes a duration as the text handler does:
// time.Duration's String.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
