package engine

import (
	"context"

	"github.com/probed/probed/engine/probe"
)

// Checker runs one probe's check. Check must honour ctx (its deadline is
// the probe's effective timeout) and report a failing target as an
// Outcome, never by panicking. One Checker serves one probe of one target
// and is never called concurrently with itself; Close releases what it
// holds (pooled connections).
type Checker interface {
	Check(ctx context.Context) probe.Outcome
	Close()
}

// Checkers builds the Checker of one probe; the engine calls Open when a
// probe is created or its handler changes.
type Checkers interface {
	Open(target string, typ probe.Type, h probe.Handler) (Checker, error)
}
