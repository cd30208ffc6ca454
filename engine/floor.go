package engine

import (
	"fmt"
	"strings"

	"github.com/probed/probed/engine/probe"
)

// effective is the timing the engine uses for p: its effective values
// with the server's floors (MinPeriod, MinTimeout) applied. Validation
// keeps new specs above the floors; a target stored before they were
// raised is clamped to them, since a floor is the operator's protection
// against overload.
func (e *Engine) effective(p *probe.Spec) probe.Effective {
	eff, _ := p.Effective().AtLeast(e.opts.MinPeriod, e.opts.MinTimeout)
	return eff
}

// warnFlooredLocked logs, in one line per restored target, the probes whose
// timing was raised to the floors; en.mu held.
func (e *Engine) warnFlooredLocked(en *entry) {
	var raised []string
	for _, r := range en.runners {
		if r == nil {
			continue
		}
		spec := r.spec.Effective()
		var changes []string
		for _, d := range []struct {
			name     string
			from, to fmt.Stringer
		}{
			{"period", spec.Period, r.eff.Period},
			{"initial period", spec.InitialPeriod, r.eff.InitialPeriod},
			{"timeout", spec.Timeout, r.eff.Timeout},
		} {
			if d.from != d.to {
				changes = append(changes, fmt.Sprintf("%s %v → %v", d.name, d.from, d.to))
			}
		}
		if len(changes) > 0 {
			raised = append(raised, r.typ.String()+": "+strings.Join(changes, ", "))
		}
	}
	if len(raised) > 0 {
		e.log.Warn("restored target raised to the server's floors (--min-period, --min-timeout)",
			"target", en.name, "probes", strings.Join(raised, "; "))
	}
}
