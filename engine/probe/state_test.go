package probe_test

import (
	"testing"

	"github.com/probed/probed/engine/probe"
)

const (
	S = probe.Success
	F = probe.Failure
	U = probe.Unknown
)

func TestInitial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  probe.Type
		want probe.Result
	}{
		{probe.Readiness, probe.Failure},
		{probe.Liveness, probe.Success},
		{probe.Startup, probe.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			t.Parallel()
			s := probe.Initial(tt.typ)
			if s.Result != tt.want || s.HasInitialized || s.Run != 0 {
				t.Errorf("Initial(%v) = %+v, want Result %v, not initialized, no run", tt.typ, s, tt.want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	t.Parallel()
	eff := func(success, failure, initFailure int32) probe.Effective {
		return probe.Effective{SuccessThreshold: success, FailureThreshold: failure, InitializationFailureThreshold: max(initFailure, failure)}
	}
	type step struct {
		in          probe.Result
		want        probe.Result // published after the step
		transition  bool
		initialized bool
	}
	tests := []struct {
		name  string
		typ   probe.Type
		eff   probe.Effective
		steps []step
	}{
		{
			name:  "readiness passes on first success with threshold 1",
			typ:   probe.Readiness,
			eff:   eff(1, 3, 0),
			steps: []step{{in: S, want: S, transition: true, initialized: true}, {in: S, want: S}},
		},
		{
			name: "readiness needs success threshold consecutive successes",
			typ:  probe.Readiness,
			eff:  eff(3, 3, 0),
			steps: []step{
				{in: S, want: F}, {in: S, want: F}, {in: F, want: F}, // a failure resets the run
				{in: S, want: F}, {in: S, want: F}, {in: S, want: S, transition: true, initialized: true},
			},
		},
		{
			name: "failure threshold counts consecutive failures after initialization",
			typ:  probe.Readiness,
			eff:  eff(1, 3, 0),
			steps: []step{
				{in: S, want: S, transition: true, initialized: true},
				{in: F, want: S}, {in: F, want: S}, {in: S, want: S}, // run broken
				{in: F, want: S}, {in: F, want: S}, {in: F, want: F, transition: true},
				{in: F, want: F}, // no second transition
				{in: S, want: S, transition: true},
			},
		},
		{
			name:  "liveness starts as success: failures publish failure",
			typ:   probe.Liveness,
			eff:   eff(1, 2, 0),
			steps: []step{{in: F, want: S}, {in: F, want: F, transition: true}, {in: S, want: S, transition: true, initialized: true}},
		},
		{
			name:  "liveness first success initializes without a transition",
			typ:   probe.Liveness,
			eff:   eff(1, 3, 0),
			steps: []step{{in: S, want: S, initialized: true}, {in: S, want: S}},
		},
		{
			name:  "startup goes from unknown to success",
			typ:   probe.Startup,
			eff:   eff(1, 3, 0),
			steps: []step{{in: F, want: U}, {in: S, want: S, transition: true, initialized: true}},
		},
		{
			name:  "startup publishes failure at its threshold",
			typ:   probe.Startup,
			eff:   eff(1, 2, 0),
			steps: []step{{in: F, want: U}, {in: F, want: F, transition: true}},
		},
		{
			name:  "unknown outcomes are discarded and do not break a run",
			typ:   probe.Readiness,
			eff:   eff(2, 3, 0),
			steps: []step{{in: S, want: F}, {in: U, want: F}, {in: S, want: S, transition: true, initialized: true}},
		},
		{
			// A checker that cannot run at all publishes Unknown at the
			// failure threshold that applies, instead of freezing the last
			// result; the next real outcome resumes the run it interrupted.
			name: "unknowns publish unknown at the failure threshold, then the run resumes",
			typ:  probe.Readiness,
			eff:  eff(1, 3, 0),
			steps: []step{
				{in: S, want: S, transition: true, initialized: true},
				{in: U, want: S}, {in: U, want: S}, {in: U, want: U, transition: true},
				{in: U, want: U}, // no second transition
				{in: S, want: S, transition: true},
			},
		},
		{
			name: "unknowns before initialization need the initialization failure threshold",
			typ:  probe.Readiness,
			eff:  eff(1, 2, 4),
			steps: []step{
				{in: U, want: F}, {in: U, want: F}, {in: U, want: F}, {in: U, want: U, transition: true},
				{in: F, want: U}, // a new failure run of 1 (below 4)
			},
		},
		{
			name: "unknowns interleaved with failures do not hide the failures",
			typ:  probe.Liveness,
			eff:  eff(1, 3, 0),
			steps: []step{
				{in: F, want: S}, {in: U, want: S}, {in: F, want: S}, {in: U, want: S}, {in: F, want: F, transition: true},
			},
		},
		{
			name:  "startup unknowns change nothing: startup starts as unknown",
			typ:   probe.Startup,
			eff:   eff(1, 1, 0),
			steps: []step{{in: U, want: U}, {in: U, want: U}, {in: S, want: S, transition: true, initialized: true}},
		},
		{
			// Seed 003, case 1: period 10, initializationFailureThreshold 20,
			// failureThreshold 3: 20 failures at startup fail the probe.
			name:  "seed 003 case 1: never initialized fails after initializationFailureThreshold",
			typ:   probe.Liveness,
			eff:   eff(1, 3, 20),
			steps: append(repeat(step{in: F, want: S}, 19), step{in: F, want: F, transition: true}),
		},
		{
			// Seed 003, case 2: 10 failures at startup, a success, then after
			// a long time 3 failures: failureThreshold applies.
			name: "seed 003 case 2: initialized then fails after failureThreshold (total > init threshold)",
			typ:  probe.Liveness,
			eff:  eff(1, 3, 20),
			steps: concat(
				repeat(step{in: F, want: S}, 10),
				[]step{{in: S, want: S, initialized: true}},
				repeat(step{in: S, want: S}, 30),
				[]step{{in: F, want: S}, {in: F, want: S}, {in: F, want: F, transition: true}},
			),
		},
		{
			// Seed 003, case 3: 10 failures, one success, 3 more failures,
			// still within the first 20 probes: failureThreshold applies.
			name: "seed 003 case 3: initialized then fails after failureThreshold (total < init threshold)",
			typ:  probe.Liveness,
			eff:  eff(1, 3, 20),
			steps: concat(
				repeat(step{in: F, want: S}, 10),
				[]step{{in: S, want: S, initialized: true}},
				[]step{{in: F, want: S}, {in: F, want: S}, {in: F, want: F, transition: true}},
			),
		},
		{
			name:  "readiness with init threshold stays failure (no transition) while counting",
			typ:   probe.Readiness,
			eff:   eff(1, 3, 5),
			steps: append(repeat(step{in: F, want: F}, 6), step{in: S, want: S, transition: true, initialized: true}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := probe.Initial(tt.typ)
			for i, st := range tt.steps {
				prev := s.Result
				var c probe.Change
				s, c = s.Observe(st.in, tt.eff)
				if s.Result != st.want || c.Transition != st.transition || c.Initialized != st.initialized {
					t.Fatalf("step %d (%v): got result %v transition %v initialized %v, want %v %v %v",
						i, st.in, s.Result, c.Transition, c.Initialized, st.want, st.transition, st.initialized)
				}
				if c.Transition && c.From != prev {
					t.Fatalf("step %d: From = %v, want %v", i, c.From, prev)
				}
			}
		})
	}
}

func TestObserveDoesNotMutateReceiver(t *testing.T) {
	t.Parallel()
	s := probe.Initial(probe.Readiness)
	_, _ = s.Observe(probe.Success, probe.Effective{SuccessThreshold: 1, FailureThreshold: 3, InitializationFailureThreshold: 3})
	if s != probe.Initial(probe.Readiness) {
		t.Errorf("Observe mutated its receiver: %+v", s)
	}
}

func TestConsecutive(t *testing.T) {
	t.Parallel()
	eff := probe.Effective{SuccessThreshold: 5, FailureThreshold: 5, InitializationFailureThreshold: 5}
	s := probe.Initial(probe.Readiness)
	s, _ = s.Observe(F, eff)
	s, _ = s.Observe(F, eff)
	if s.ConsecutiveFailures() != 2 || s.ConsecutiveSuccesses() != 0 {
		t.Errorf("after 2 failures: successes %d failures %d", s.ConsecutiveSuccesses(), s.ConsecutiveFailures())
	}
	s, _ = s.Observe(S, eff)
	if s.ConsecutiveFailures() != 0 || s.ConsecutiveSuccesses() != 1 {
		t.Errorf("after a success: successes %d failures %d", s.ConsecutiveSuccesses(), s.ConsecutiveFailures())
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
