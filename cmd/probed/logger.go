package main

import (
	"context"
	"io"
	"log/slog"
	"math"
)

// newLoggerTo returns the logger --log-level and --log-format ask for,
// writing to w. Durations read the same in both formats, in Go's notation
// with their unit ("latency=1.2ms", "latency":"1.2ms"), never as a bare
// count of nanoseconds. A record logged with a context from announcing is
// written whatever the level (see announcing).
func newLoggerTo(w io.Writer, cfg *config) *slog.Logger {
	// The inner handler writes every record it is handed; levelHandler
	// decides which.
	opts := &slog.HandlerOptions{Level: slog.Level(math.MinInt)}
	var h slog.Handler
	if cfg.logFormat == "json" {
		opts.ReplaceAttr = durationString
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(levelHandler{Handler: h, level: cfg.logLevel})
}

// announceKey marks a context whose records are written at every level.
type announceKey struct{}

// announcing returns ctx marked so that a record logged with it is
// written whatever --log-level says: the line saying that probed serves,
// and where, is what whoever started probed (a supervisor, a test, the
// operator reading a quiet log) waits for, so it must not depend on the
// level. Its own level stays what it is (INFO).
func announcing(ctx context.Context) context.Context {
	return context.WithValue(ctx, announceKey{}, true)
}

// levelHandler writes the records at or above level, and the announced
// ones.
type levelHandler struct {
	slog.Handler
	level slog.Leveler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() || ctx.Value(announceKey{}) != nil
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{Handler: h.Handler.WithGroup(name), level: h.level}
}

// durationString writes a duration as the text handler does:
// time.Duration's String.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
