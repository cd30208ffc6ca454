// Package probe is the vocabulary of probing: a probe's Spec and its
// Effective timing, the Result of a probe and the Outcome of one execution,
// validation and defaulting exactly as KEP-3066 (subsecond probes) and the
// initializationFailureThreshold proposal describe, and the State machine
// that turns raw outcomes into published results as kubelet does.
package probe

import "fmt"

// Type is one of a target's three probes.
type Type uint8

// The probe types, in the order kubelet evaluates them.
const (
	Startup Type = iota
	Liveness
	Readiness
)

// Types lists every probe type in order; the index of a type in it is the
// type's value.
var Types = [...]Type{Startup, Liveness, Readiness}

// NumTypes is the number of probe types.
const NumTypes = len(Types)

// String returns "startup", "liveness" or "readiness".
func (t Type) String() string {
	switch t {
	case Startup:
		return "startup"
	case Liveness:
		return "liveness"
	case Readiness:
		return "readiness"
	default:
		return fmt.Sprintf("Type(%d)", uint8(t))
	}
}

// Field is the JSON name of the target field holding a probe of this type.
func (t Type) Field() string {
	switch t {
	case Startup:
		return "startupProbe"
	case Liveness:
		return "livenessProbe"
	case Readiness:
		return "readinessProbe"
	default:
		return t.String()
	}
}

// Result is a probe's result: raw from one execution, or published after
// the thresholds.
type Result uint8

// The results. Unknown is the zero value: a startup probe that has not
// decided yet, or an execution that could not run (it counts toward no
// threshold).
const (
	Unknown Result = iota
	Success
	Failure
)

// String returns "unknown", "success" or "failure".
func (r Result) String() string {
	switch r {
	case Unknown:
		return "unknown"
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return fmt.Sprintf("Result(%d)", uint8(r))
	}
}

// MarshalText encodes the type by name, so stored data stays readable and
// independent of the constants' values.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (t *Type) UnmarshalText(b []byte) error {
	for _, c := range Types {
		if c.String() == string(b) {
			*t = c
			return nil
		}
	}
	return fmt.Errorf("unknown probe type %q", b)
}

// MarshalText encodes the result by name.
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText decodes a name written by MarshalText.
func (r *Result) UnmarshalText(b []byte) error {
	for _, c := range []Result{Unknown, Success, Failure} {
		if c.String() == string(b) {
			*r = c
			return nil
		}
	}
	return fmt.Errorf("unknown probe result %q", b)
}
