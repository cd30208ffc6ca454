package procs

import (
	"os"
	"os/signal"
)

// RestoreInterrupt gives the children this process starts from now on
// SIGINT's default action (end the process), as a terminal's Ctrl-C
// expects, when this process inherited SIGINT ignored. A background job
// of a non-interactive shell ("cmd &", nohup, some CI runners) starts with
// SIGINT ignored and passes that on through exec: a Go child turns it back
// on by asking for it (signal.Notify), but a shell script cannot (POSIX:
// a signal ignored on entry cannot be trapped), so a test that stops a
// script with SIGINT hung there (docs/decisions.md, "Signals a test
// sends"). It installs a handler that drops SIGINT, which exec resets to
// the default in every child; this process goes on ignoring it. It does
// nothing when SIGINT was not ignored. Call it from TestMain.
func RestoreInterrupt() {
	if !signal.Ignored(os.Interrupt) {
		return
	}
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
}
