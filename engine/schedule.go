package engine

import (
	"errors"
	"time"

	"github.com/probed/probed/engine/probe"
)

// startProbesLocked schedules the probes of en that should run now: the
// startup probe until it has succeeded, then liveness and readiness; it
// unschedules the others. The first run of each is at the target's start
// plus the probe's initial delay exactly; one that is due already runs at
// once. With spread (a probe taken over: after a restart, or from another
// replica) probes whose first run has passed are spread over one period
// instead, so that many targets taken at once do not fire together. It
// returns the scheduling errors (every probe is tried); en.mu held.
func (e *Engine) startProbesLocked(en *entry, now time.Time, spread bool) error {
	if en.phase() != Active || en.removed || !en.owned {
		return nil
	}
	started := en.started()
	var errs []error
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		runs := (r.typ == probe.Startup) != started
		switch {
		case !runs:
			e.exec.unscheduleLocked(r)
		case r.scheduled:
		default:
			first := en.startTime().Add(r.eff.InitialDelay)
			switch {
			case first.After(now):
				errs = append(errs, e.exec.scheduleLocked(r, first, r.period()))
			case spread:
				errs = append(errs, e.exec.spreadLocked(r, now, r.period()))
			default:
				err := e.exec.scheduleLocked(r, now.Add(r.period()), r.period())
				if err == nil {
					e.exec.runNow(r)
				}
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// scheduleFailed logs a scheduling error (the executor counts them): a
// probe the wheel refused does not run, and an operator must hear of it.
func (e *Engine) scheduleFailed(err error) {
	if err != nil {
		e.log.Error("probe not scheduled; it will not run", "err", err)
	}
}
