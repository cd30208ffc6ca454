package engine

import (
	"context"

	"github.com/probed/probed/engine/probe"
)

// Checker runs one probe's check. Check must honour ctx, which is
// cancelled when the probe's effective timeout passes (on the engine's
// clock; ctx has no Deadline), and report a failing target as an Outcome,
// never by panicking. One Checker serves one probe of one target.
//
// The engine calls Check from one goroutine at a time (a probe never
// overlaps itself), and Close once, never while Check runs: a checker
// replaced (a changed handler) or dropped (a removed or disowned target,
// the engine stopping) while its run is in progress is closed when that
// run has returned. Check is never called after Close. Close releases what
// the checker holds (pooled connections).
type Checker interface {
	Check(ctx context.Context) probe.Outcome
	Close()
}

// Checkers builds the Checker of one probe; the engine calls Open when a
// probe is created or its handler changes.
type Checkers interface {
	Open(target string, typ probe.Type, h probe.Handler) (Checker, error)
}
