package probe

import "time"

// Kubernetes' defaults (pkg/apis/core/v1/defaults.go), applied to the
// seconds fields before the milliseconds are added.
const (
	DefaultTimeoutSeconds   = 1
	DefaultPeriodSeconds    = 10
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// Effective is the timing and thresholds the engine computed from a Spec and
// uses. Users see it in every ProbeStatus, so what their seconds and
// milliseconds became is never a guess.
type Effective struct {
	InitialDelay time.Duration `json:"initialDelay"`
	Period       time.Duration `json:"period"`
	Timeout      time.Duration `json:"timeout"`
	// InitialPeriod is the period until the probe first passes; it equals
	// Period when the spec sets no initial period.
	InitialPeriod                  time.Duration `json:"initialPeriod"`
	SuccessThreshold               int32         `json:"successThreshold"`
	FailureThreshold               int32         `json:"failureThreshold"`
	InitializationFailureThreshold int32         `json:"initializationFailureThreshold"`
}

// Effective applies the defaults and sums seconds and milliseconds, exactly
// as KEP-3066 says: timeoutSeconds 0 → 1, periodSeconds 0 → 10,
// successThreshold 0 → 1, failureThreshold 0 → 3, then effective = seconds +
// milliseconds (so periodSeconds 0 with periodMilliseconds 500 is 10.5 s).
// An initializationFailureThreshold that is unset, 0 or below the failure
// threshold becomes the failure threshold. Effective does not validate: call
// Validate first.
func (s *Spec) Effective() Effective {
	timeoutSeconds := defaulted(s.TimeoutSeconds, DefaultTimeoutSeconds)
	periodSeconds := defaulted(s.PeriodSeconds, DefaultPeriodSeconds)
	e := Effective{
		InitialDelay:     Duration(s.InitialDelaySeconds, s.InitialDelayMilliseconds),
		Timeout:          Duration(timeoutSeconds, s.TimeoutMilliseconds),
		Period:           Duration(periodSeconds, s.PeriodMilliseconds),
		SuccessThreshold: defaulted(s.SuccessThreshold, DefaultSuccessThreshold),
		FailureThreshold: defaulted(s.FailureThreshold, DefaultFailureThreshold),
	}
	e.InitialPeriod = e.Period
	if s.InitialPeriodSeconds != nil || s.InitialPeriodMilliseconds != nil {
		e.InitialPeriod = Duration(deref(s.InitialPeriodSeconds), s.InitialPeriodMilliseconds)
	}
	e.InitializationFailureThreshold = max(deref(s.InitializationFailureThreshold), e.FailureThreshold)
	return e
}

// Duration combines a seconds field and its optional milliseconds offset
// (KEP-3066's GetProbeTimeDuration).
func Duration(seconds int32, milliseconds *int32) time.Duration {
	d := time.Duration(seconds) * time.Second
	if milliseconds != nil {
		d += time.Duration(*milliseconds) * time.Millisecond
	}
	return d
}

func defaulted(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// AtLeast returns e with its period and initial period raised to
// minPeriod and its timeout to minTimeout where they are below, and
// whether any was: the server's floors (--min-period, --min-timeout)
// applied to a spec validated under lower ones (a target stored before
// the floors were raised).
func (e Effective) AtLeast(minPeriod, minTimeout time.Duration) (Effective, bool) {
	out := e
	out.Period = max(e.Period, minPeriod)
	out.InitialPeriod = max(e.InitialPeriod, minPeriod)
	out.Timeout = max(e.Timeout, minTimeout)
	return out, out != e
}
