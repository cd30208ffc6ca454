package client_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func TestProbeDuration(t *testing.T) {
	t.Parallel()
	const unset = math.MinInt32 // milliseconds nil
	tests := []struct {
		name    string
		d       time.Duration
		seconds int32
		millis  int32
	}{
		{"zero is the default", 0, 0, unset},
		{"50ms is 1s - 950ms", 50 * time.Millisecond, 1, -950},
		{"100ms", 100 * time.Millisecond, 1, -900},
		{"999ms", 999 * time.Millisecond, 1, -1},
		{"one second", time.Second, 1, unset},
		{"1.5s", 1500 * time.Millisecond, 1, 500},
		{"whole seconds", 3 * time.Second, 3, unset},
		{"2.25s", 2250 * time.Millisecond, 2, 250},
		{"a microsecond rounds up", time.Microsecond, 1, -999},
		{"sub-millisecond rest rounds up", 1500*time.Millisecond + time.Microsecond, 1, 501},
		{"negative: seconds the server rejects", -50 * time.Millisecond, -1, 950},
		{"negative whole seconds", -2 * time.Second, -2, unset},
		{"negative sub-millisecond rounds down", -time.Microsecond, -1, 999},
		{"huge is capped", math.MaxInt64, math.MaxInt32, unset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, m := client.ProbeDuration(tt.d)
			got := int32(unset)
			if m != nil {
				got = *m
				if got == 0 {
					t.Errorf("milliseconds = &0, want nil")
				}
			}
			if s != tt.seconds || got != tt.millis {
				t.Errorf("ProbeDuration(%v) = %d s, %s; want %d s, %s", tt.d, s, millisText(got), tt.seconds, millisText(tt.millis))
			}
			// The pair adds up to d, rounded to the millisecond.
			sum := time.Duration(s) * time.Second
			if m != nil {
				sum += time.Duration(*m) * time.Millisecond
			}
			if tt.d != math.MaxInt64 && (sum-tt.d).Abs() >= time.Millisecond {
				t.Errorf("%d s + %s = %v, want %v", s, millisText(got), sum, tt.d)
			}
		})
	}
}

func millisText(ms int32) string {
	if ms == math.MinInt32 {
		return "nil ms"
	}
	return fmt.Sprintf("%d ms", ms)
}

// Knative's probe: every 50 ms until the pod first answers, then every
// second, with a 300 ms timeout.
func ExampleProbeDuration() {
	p := &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: "10.0.0.7", Port: 8012, Path: "/healthz"}},
	}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(time.Second)
	p.TimeoutSeconds, p.TimeoutMilliseconds = client.ProbeDuration(300 * time.Millisecond)
	s, ms := client.ProbeDuration(50 * time.Millisecond)
	p.InitialPeriodSeconds, p.InitialPeriodMilliseconds = &s, ms

	fmt.Println("period:", p.GetPeriodSeconds(), "s", p.PeriodMilliseconds == nil)
	fmt.Println("timeout:", p.GetTimeoutSeconds(), "s", p.GetTimeoutMilliseconds(), "ms")
	fmt.Println("initial period:", p.GetInitialPeriodSeconds(), "s", p.GetInitialPeriodMilliseconds(), "ms")
	// Output:
	// period: 1 s true
	// timeout: 1 s -700 ms
	// initial period: 1 s -950 ms
}
