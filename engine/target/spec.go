// Package target describes a probed target as a client registers it: its
// name, labels, up to three probes and its lifecycle, with the validation
// that applies on create and on update (KEP-4818's ratcheting included).
package target

import (
	"math"
	"time"

	"github.com/probed/probed/engine/probe"
)

// DefaultTerminationGracePeriodSeconds is Kubernetes' default grace period.
const DefaultTerminationGracePeriodSeconds = 30

// Spec is a target as a client wrote it. It is treated as immutable once
// handed to the engine: an update replaces it.
type Spec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`

	StartupProbe   *probe.Spec `json:"startupProbe,omitempty"`
	LivenessProbe  *probe.Spec `json:"livenessProbe,omitempty"`
	ReadinessProbe *probe.Spec `json:"readinessProbe,omitempty"`

	Lifecycle                     *Lifecycle `json:"lifecycle,omitempty"`
	TerminationGracePeriodSeconds *int64     `json:"terminationGracePeriodSeconds,omitempty"`
}

// Lifecycle holds the target's hooks.
type Lifecycle struct {
	PreStop *Handler `json:"preStop,omitempty"`
}

// Handler is one hook action; exactly one field is set.
type Handler struct {
	Sleep *SleepAction `json:"sleep,omitempty"`
}

// SleepAction waits before the target is removed (KEP-3960, KEP-4818).
type SleepAction struct {
	Seconds int64 `json:"seconds"`
}

// Probe returns the probe of type t, or nil when the target has none.
func (s *Spec) Probe(t probe.Type) *probe.Spec {
	switch t {
	case probe.Startup:
		return s.StartupProbe
	case probe.Liveness:
		return s.LivenessProbe
	case probe.Readiness:
		return s.ReadinessProbe
	default:
		return nil
	}
}

// GracePeriod is the effective termination grace period.
func (s *Spec) GracePeriod() time.Duration {
	return seconds(s.gracePeriodSeconds())
}

// seconds converts n seconds to a Duration, saturating at the largest
// (smallest) Duration instead of wrapping around.
func seconds(n int64) time.Duration {
	const limit = int64(math.MaxInt64 / time.Second)
	switch {
	case n > limit:
		return math.MaxInt64
	case n < -limit:
		return math.MinInt64
	default:
		return time.Duration(n) * time.Second
	}
}

func (s *Spec) gracePeriodSeconds() int64 {
	if s.TerminationGracePeriodSeconds == nil {
		return DefaultTerminationGracePeriodSeconds
	}
	return *s.TerminationGracePeriodSeconds
}

// PreStopSleep returns the preStop sleep and whether there is one.
func (s *Spec) PreStopSleep() (time.Duration, bool) {
	if s.Lifecycle == nil || s.Lifecycle.PreStop == nil || s.Lifecycle.PreStop.Sleep == nil {
		return 0, false
	}
	return seconds(s.Lifecycle.PreStop.Sleep.Seconds), true
}

// UsesMilliseconds reports whether any probe sets a *Milliseconds field.
func (s *Spec) UsesMilliseconds() bool {
	if s == nil {
		return false
	}
	for _, t := range probe.Types {
		if s.Probe(t).UsesMilliseconds() {
			return true
		}
	}
	return false
}

// UsesZeroSleep reports whether the preStop hook sleeps for 0 seconds.
func (s *Spec) UsesZeroSleep() bool {
	if s == nil {
		return false
	}
	d, ok := s.PreStopSleep()
	return ok && d == 0
}
