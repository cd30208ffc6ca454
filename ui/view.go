package ui

import (
	"strings"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// This file holds the page's JSON: compact views of targets, events and
// live probe figures, made for a browser holding thousands of targets
// (the full API form of a target is Options.TargetJSON).

// targetView is a target as the page lists it.
type targetView struct {
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels,omitempty"`
	Phase   string            `json:"phase"`
	Started bool              `json:"started"`
	Live    bool              `json:"live"`
	Ready   bool              `json:"ready"`
	// Rev is the revision of the last event about the target.
	Rev     uint64 `json:"rev"`
	Created int64  `json:"created,omitempty"` // Unix milliseconds
	// Probes are keyed by probe type ("startup", "liveness",
	// "readiness"); a type the target has no probe of is absent.
	Probes map[string]*probeView `json:"probes,omitempty"`
	// Replica is the replica that probes the target ("" while its shard
	// changes hands); absent on a single node.
	Replica *string `json:"replica,omitempty"`
}

// probeView is a probe's published state and effective timing.
type probeView struct {
	Result      string `json:"result"`
	Initialized bool   `json:"initialized,omitempty"`
	// Transition is the time of the last change of Result, Unix ms.
	Transition      int64   `json:"transition,omitempty"`
	PeriodMs        float64 `json:"periodMs"`
	InitialPeriodMs float64 `json:"initialPeriodMs"`
	TimeoutMs       float64 `json:"timeoutMs"`
	InitialDelayMs  float64 `json:"initialDelayMs,omitempty"`
	Success         int32   `json:"successThreshold"`
	Failure         int32   `json:"failureThreshold"`
}

// eventView is one engine event.
type eventView struct {
	Rev     uint64 `json:"rev"`
	Time    int64  `json:"time"` // Unix milliseconds
	Name    string `json:"name"`
	Kind    string `json:"kind"` // "transition", "created", ... in lower case
	Probe   string `json:"probe,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// LatencyUs is the latency of the probe run that caused the event.
	LatencyUs int64 `json:"latencyUs,omitempty"`
	Started   bool  `json:"started"`
	Live      bool  `json:"live"`
	Ready     bool  `json:"ready"`
	// Target is the whole target after a lifecycle event.
	Target *targetView `json:"target,omitempty"`
}

// statsView is the live figures of a target's probes, which no event
// carries.
type statsView struct {
	Name   string                 `json:"name"`
	Probes map[string]*probeStats `json:"probes"`
	// Replica is as in targetView.
	Replica *string `json:"replica,omitempty"`
}

// probeStats is the live figures of one probe.
type probeStats struct {
	Total     uint64 `json:"total"`
	Message   string `json:"message,omitempty"`
	LatencyUs int64  `json:"latencyUs"`
	Last      int64  `json:"last,omitempty"` // time of the last run, Unix ms
	Successes int32  `json:"successes"`
	Failures  int32  `json:"failures"`
	// Results are the recent runs' results, oldest first, one letter each:
	// s(uccess), f(ailure), u(nknown); Latencies their latencies in µs.
	Results   string  `json:"results"`
	Latencies []int64 `json:"latencies"`
}

func viewTarget(t *engine.Target) *targetView {
	v := &targetView{
		Name:    t.Spec.Name,
		Labels:  t.Spec.Labels,
		Phase:   t.Status.Phase.String(),
		Started: t.Status.Started(),
		Live:    t.Status.Live(),
		Ready:   t.Status.Ready(),
		Rev:     t.Status.Revision,
		Created: unixMilli(t.Status.CreateTime),
	}
	for _, typ := range probe.Types {
		spec := t.Spec.Probe(typ)
		ps := &t.Status.Probes[typ]
		if spec == nil || !ps.Present {
			continue
		}
		eff := ps.Effective // with the server's floors applied
		if eff == (probe.Effective{}) {
			eff = spec.Effective()
		}
		if v.Probes == nil {
			v.Probes = make(map[string]*probeView, probe.NumTypes)
		}
		v.Probes[typ.String()] = &probeView{
			Result:          ps.Result.String(),
			Initialized:     ps.HasInitialized,
			Transition:      unixMilli(ps.LastTransitionTime),
			PeriodMs:        millis(eff.Period),
			InitialPeriodMs: millis(eff.InitialPeriod),
			TimeoutMs:       millis(eff.Timeout),
			InitialDelayMs:  millis(eff.InitialDelay),
			Success:         eff.SuccessThreshold,
			Failure:         eff.FailureThreshold,
		}
	}
	return v
}

// viewEvents is viewEvent of each of evs.
func viewEvents(evs []engine.Event) []eventView {
	out := make([]eventView, len(evs))
	for i := range evs {
		out[i] = viewEvent(&evs[i])
	}
	return out
}

func viewEvent(ev *engine.Event) eventView {
	v := eventView{
		Rev:     ev.Revision,
		Time:    unixMilli(ev.Time),
		Name:    ev.Name,
		Kind:    kindName(ev.Kind),
		Message: ev.Message,
		Reason:  ev.Reason,
		Started: ev.Started,
		Live:    ev.Live,
		Ready:   ev.Ready,
	}
	if ev.Kind == engine.KindTransition || ev.Kind == engine.KindInitialized {
		v.Probe = ev.Probe.String()
		v.From = ev.From.String()
		v.To = ev.To.String()
		v.LatencyUs = ev.Latency.Microseconds()
	}
	if ev.Target != nil {
		v.Target = viewTarget(ev.Target)
	}
	return v
}

// viewStats returns the live figures of t's probes.
func viewStats(t *engine.Target) *statsView {
	v := &statsView{Name: t.Spec.Name, Probes: make(map[string]*probeStats, probe.NumTypes)}
	for _, typ := range probe.Types {
		ps := &t.Status.Probes[typ]
		if !ps.Present || t.Spec.Probe(typ) == nil {
			continue
		}
		s := &probeStats{
			Total:     ps.ProbesTotal,
			Message:   ps.LastMessage,
			LatencyUs: ps.LastLatency.Microseconds(),
			Last:      unixMilli(ps.LastProbeTime),
			Successes: ps.ConsecutiveSuccesses,
			Failures:  ps.ConsecutiveFailures,
			Latencies: make([]int64, len(ps.Recent)),
		}
		results := make([]byte, len(ps.Recent))
		for i, smp := range ps.Recent {
			results[i] = resultLetter(smp.Result)
			s.Latencies[i] = smp.Latency.Microseconds()
		}
		s.Results = string(results)
		v.Probes[typ.String()] = s
	}
	return v
}

func resultLetter(r probe.Result) byte {
	switch r {
	case probe.Success:
		return 's'
	case probe.Failure:
		return 'f'
	default:
		return 'u'
	}
}

// kindName is the kind in lower case: "transition", "created", ...
func kindName(k engine.EventKind) string { return strings.ToLower(k.String()) }

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
