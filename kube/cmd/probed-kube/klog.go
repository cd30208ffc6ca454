package main

import (
	"context"
	"log/slog"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// klogTarget is where client-go's klog lines go: the logger of the run in
// progress (run stores it), discarded before the first. klog's own global
// logger is set once, at init, before any goroutine can read it, to a
// handler that reads this pointer: setting klog's global again in run would
// race with the klog reads of goroutines already running (a test's
// informers, or an earlier run's leftovers).
var klogTarget atomic.Pointer[slog.Handler]

func init() {
	klog.SetSlogLogger(slog.New(klogHandler{}))
}

// routeKlog sends client-go's klog lines to log from now on.
func routeKlog(log *slog.Logger) {
	h := log.Handler()
	klogTarget.Store(&h)
}

// klogHandler forwards to klogTarget's handler as it is when a record is
// handled, with the attributes and groups given on the way.
type klogHandler struct {
	with []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (k klogHandler) target() slog.Handler {
	p := klogTarget.Load()
	if p == nil {
		return nil
	}
	h := *p
	for _, w := range k.with {
		h = w(h)
	}
	return h
}

// Enabled reports whether the current target takes records of level.
func (k klogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	p := klogTarget.Load()
	return p != nil && (*p).Enabled(ctx, level)
}

// Handle passes r to the current target, if any.
func (k klogHandler) Handle(ctx context.Context, r slog.Record) error {
	h := k.target()
	if h == nil {
		return nil
	}
	return h.Handle(ctx, r)
}

// WithAttrs returns a handler that adds attrs on the target.
func (k klogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return k.and(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

// WithGroup returns a handler that opens group on the target.
func (k klogHandler) WithGroup(name string) slog.Handler {
	return k.and(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

func (k klogHandler) and(w func(slog.Handler) slog.Handler) klogHandler {
	with := make([]func(slog.Handler) slog.Handler, len(k.with), len(k.with)+1)
	copy(with, k.with)
	return klogHandler{with: append(with, w)}
}
