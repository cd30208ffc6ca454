package engine

import (
	"context"

	"github.com/probed/probed/engine/probe"
)

// refusedChecker stands in for a checker that could not be opened for a
// restored target: every run fails with the reason.
type refusedChecker struct{ reason string }

func (c refusedChecker) Check(context.Context) probe.Outcome {
	return probe.Outcome{Result: probe.Failure, Message: "cannot run this probe: " + c.reason}
}

func (refusedChecker) Close() {}
