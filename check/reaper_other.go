//go:build !linux

package check

import "log/slog"

// StartReaper does nothing but on Linux, where it makes the process a
// child subreaper and reaps what exec probes leave behind.
func StartReaper(*slog.Logger) (stop func(), err error) { return func() {}, nil }
