package engine

import (
	"fmt"
	"time"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
)

// Phase is where a target is in its life.
type Phase uint8

// The phases.
const (
	// Active: being probed.
	Active Phase = iota + 1
	// Terminating: deleted, draining (preStop sleep), then removed.
	Terminating
)

// MarshalText encodes the phase by name.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (p *Phase) UnmarshalText(b []byte) error {
	switch string(b) {
	case "active":
		*p = Active
	case "terminating":
		*p = Terminating
	default:
		return fmt.Errorf("unknown phase %q", b)
	}
	return nil
}

func (p Phase) String() string {
	switch p {
	case Active:
		return "active"
	case Terminating:
		return "terminating"
	default:
		return "unknown"
	}
}

// Target is a target as the engine reports it: its spec and status.
// Targets returned by the engine are snapshots owned by the caller; the
// Spec they point to is shared and must not be modified.
type Target struct {
	Spec   *target.Spec
	Status Status
}

// Status is what the engine knows about a target. The fields without a
// "live" note are durable: the store persists them with the event that
// changed them, so they survive a restart.
type Status struct {
	Phase Phase `json:"phase"`
	// Probes is indexed by probe.Type; a type the target has no probe of
	// is the zero ProbeStatus and Present false.
	Probes     [probe.NumTypes]ProbeStatus `json:"probes"`
	CreateTime time.Time                   `json:"createTime"`
	// Client is the client identity that created the target (see
	// WithClient); empty without authentication.
	Client string `json:"owner,omitempty"`
	// Owner is the set (ApplyTargets' owner) that manages the target;
	// empty for a target created by Create.
	Owner string `json:"setOwner,omitempty"`
	// StartTime is the creation or the last reset: initial delays count
	// from it.
	StartTime  time.Time `json:"startTime"`
	DeleteTime time.Time `json:"deleteTime,omitzero"`
	// DeletionGracePeriod is the grace period the deletion was given
	// (WithGracePeriod), counted from DeleteTime; nil: the spec's.
	DeletionGracePeriod *time.Duration `json:"deletionGracePeriod,omitempty"`
	// Revision is the revision of the last event about the target.
	Revision uint64 `json:"revision"`
}

// ProbeStatus is the state of one probe.
type ProbeStatus struct {
	Present            bool         `json:"present,omitempty"`
	Result             probe.Result `json:"result"`
	HasInitialized     bool         `json:"hasInitialized,omitempty"`
	LastTransitionTime time.Time    `json:"lastTransitionTime,omitzero"`

	// Live fields: kept in memory only (persisting them would be one write
	// per probe); zero after a restart until the next probe.
	Effective            probe.Effective `json:"-"`
	ConsecutiveSuccesses int32           `json:"-"`
	ConsecutiveFailures  int32           `json:"-"`
	LastProbeTime        time.Time       `json:"-"`
	LastMessage          string          `json:"-"`
	LastLatency          time.Duration   `json:"-"`
	ProbesTotal          uint64          `json:"-"`
	// Recent are the last RecentSamples runs, oldest first.
	Recent []Sample `json:"-"`
}

// Started: the startup probe has succeeded, or there is none.
func (s *Status) Started() bool {
	p := s.Probes[probe.Startup]
	return !p.Present || p.Result == probe.Success
}

// Ready: started, not terminating, and the readiness probe is SUCCESS (or
// there is none), as kubelet derives it.
func (s *Status) Ready() bool {
	p := s.Probes[probe.Readiness]
	return s.Phase == Active && s.Started() && (!p.Present || p.Result == probe.Success)
}

// Live: the liveness probe has not failed (or there is none).
func (s *Status) Live() bool {
	p := s.Probes[probe.Liveness]
	return !p.Present || p.Result != probe.Failure
}

func nameOnly(name string) *target.Spec { return &target.Spec{Name: name} }
