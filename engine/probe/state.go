package probe

import "math"

// State is one probe's state machine, as kubelet's prober worker keeps it
// plus seed 003's hasInitialized. It is a value: Observe returns the next
// state and never mutates its receiver.
type State struct {
	// Result is the published result; it changes only when a run of
	// identical raw outcomes reaches its threshold.
	Result Result
	// HasInitialized is true once the probe has passed (reached its success
	// threshold) since creation or reset. Before that,
	// InitializationFailureThreshold failures are needed to publish Failure;
	// after it, FailureThreshold.
	HasInitialized bool
	// RunResult and Run are the current run of identical raw outcomes (not
	// persisted: a restart begins a new run).
	RunResult Result
	Run       int32
	// Unknowns counts the Unknown outcomes (the check could not run at
	// all) since the last Success or Failure. They neither extend nor break
	// the run (not persisted either).
	Unknowns int32
}

// Initial is the state of a new (or reset) probe: readiness starts as
// Failure, liveness as Success and startup as Unknown, as in kubelet.
func Initial(t Type) State {
	switch t {
	case Readiness:
		return State{Result: Failure}
	case Liveness:
		return State{Result: Success}
	default:
		return State{Result: Unknown}
	}
}

// Change says what one Observe did beyond counting.
type Change struct {
	// Transition: the published result changed (From → the new Result).
	Transition bool
	From       Result
	// Initialized: this outcome made HasInitialized true.
	Initialized bool
}

// Observe applies one raw outcome with the given thresholds.
//
// Success and Failure are kubelet's rules: the same outcome as the current
// run extends it, a different one starts a new run of 1; when the run
// reaches its threshold (SuccessThreshold for success; for failure
// InitializationFailureThreshold until the probe has initialized,
// FailureThreshold after) the result is published, which is a transition
// if it differs from the published one.
//
// Unknown (the check could not run at all: a checker panic, no checker)
// counts toward no run, as kubelet discards a prober's errors, so a
// transient fault of probed's own never flips a healthy target. But it is
// not silent: when Unknowns reach the failure threshold that applies, the
// published result becomes Unknown (a transition), so a probe that cannot
// run is seen as such instead of showing its last result forever. The
// next Success or Failure resumes the run where it was (a success run of
// a ready target publishes Success again at once).
func (s State) Observe(r Result, eff Effective) (State, Change) {
	failureThreshold := eff.FailureThreshold
	if !s.HasInitialized {
		failureThreshold = eff.InitializationFailureThreshold
	}
	var c Change
	if r != Success && r != Failure {
		if s.Unknowns < math.MaxInt32 {
			s.Unknowns++
		}
		if s.Unknowns >= failureThreshold && s.Result != Unknown {
			c.Transition, c.From = true, s.Result
			s.Result = Unknown
		}
		return s, c
	}
	s.Unknowns = 0
	if r == s.RunResult {
		if s.Run < math.MaxInt32 {
			s.Run++
		}
	} else {
		s.RunResult, s.Run = r, 1
	}
	threshold := eff.SuccessThreshold
	if r == Failure {
		threshold = failureThreshold
	}
	if s.Run < threshold {
		return s, c
	}
	if r == Success && !s.HasInitialized {
		s.HasInitialized = true
		c.Initialized = true
	}
	if s.Result != r {
		c.Transition, c.From = true, s.Result
		s.Result = r
	}
	return s, c
}

// ConsecutiveSuccesses is the length of the current run if it is of
// successes, else 0.
func (s State) ConsecutiveSuccesses() int32 {
	if s.RunResult == Success {
		return s.Run
	}
	return 0
}

// ConsecutiveFailures is the length of the current run if it is of
// failures, else 0.
func (s State) ConsecutiveFailures() int32 {
	if s.RunResult == Failure {
		return s.Run
	}
	return 0
}
