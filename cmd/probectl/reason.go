package main

import (
	"fmt"
	"strings"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// This file says why a target is in the state it is in: the MESSAGE
// column of the tables and wait-ready's timeout.

// explain returns the probe that explains t's state: the startup probe
// while t has not started, a failing liveness probe, a readiness probe
// that is not SUCCESS; when every probe passes, the one that ran last.
// ps is nil when t has no probe.
func explain(t *probev1.Target) (probe string, ps *probev1.ProbeStatus) {
	st := t.GetStatus()
	switch {
	case st.GetStartup() != nil && !st.GetStarted():
		return "startup", st.GetStartup()
	case st.GetLiveness().GetResult() == probev1.Result_RESULT_FAILURE:
		return "liveness", st.GetLiveness()
	case st.GetReadiness() != nil && st.GetReadiness().GetResult() != probev1.Result_RESULT_SUCCESS:
		return "readiness", st.GetReadiness()
	}
	var last time.Time
	for _, c := range []struct {
		name string
		ps   *probev1.ProbeStatus
	}{{"startup", st.GetStartup()}, {"liveness", st.GetLiveness()}, {"readiness", st.GetReadiness()}} {
		if c.ps == nil {
			continue
		}
		if at := c.ps.GetLastProbeTime().AsTime(); ps == nil || at.After(last) {
			probe, ps, last = c.name, c.ps, at
		}
	}
	return probe, ps
}

// messageCell is the MESSAGE column: the last message of the probe that
// explains t's state when that probe is not SUCCESS; with wide, whatever
// its result, as "probe: message".
func messageCell(t *probev1.Target, wide bool) string {
	probe, ps := explain(t)
	switch {
	case ps == nil || ps.GetLastMessage() == "":
		return "-"
	case wide:
		return cell(probe+": "+ps.GetLastMessage(), maxMessage)
	case ps.GetResult() == probev1.Result_RESULT_SUCCESS:
		return "-"
	default:
		return cell(ps.GetLastMessage(), maxMessage)
	}
}

// notReady says why t is not ready, e.g. "readiness probe: failure (3
// failures in a row, last 200ms ago): HTTP probe failed with statuscode:
// 404".
func notReady(t *probev1.Target, now time.Time) string {
	if t.GetStatus().GetPhase() == probev1.Phase_PHASE_TERMINATING {
		return "it is terminating"
	}
	probe, ps := explain(t)
	if ps == nil {
		return "it has no probe"
	}
	if ps.GetLastProbeTime() == nil {
		return fmt.Sprintf("its %s probe has not run yet (initial delay %v)", probe, ps.GetEffective().GetInitialDelay().AsDuration())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s probe: %s (", probe, resultName(ps.GetResult()))
	switch n, m := ps.GetConsecutiveFailures(), ps.GetConsecutiveSuccesses(); {
	case n > 0:
		fmt.Fprintf(&b, "%d %s in a row, ", n, count(n, "failure", "failures"))
	case m > 0:
		fmt.Fprintf(&b, "%d %s in a row, ", m, count(m, "success", "successes"))
	}
	fmt.Fprintf(&b, "last %s ago)", ago(now, ps.GetLastProbeTime().AsTime()))
	if msg := ps.GetLastMessage(); msg != "" {
		b.WriteString(": ")
		b.WriteString(cell(msg, maxMessage))
	}
	return b.String()
}

func count(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ago formats how long ago t was, at millisecond precision below a
// second.
func ago(now, t time.Time) string {
	d := max(now.Sub(t), 0)
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return age(now, t)
}
