package proxy

import (
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Knative's readiness probe, as the activator sends it to a pod's
// queue-proxy.
const (
	ProbePath      = "/healthz"
	ProbeHeader    = "K-Network-Probe"
	ProbeQueue     = "queue" // the header's value, and the expected body
	ProbeUserAgent = "Knative-Activator-Probe"
)

// Target returns the target the proxy registers for b with o (defaults
// applied): a readiness probe only, Knative's, fast until ready.
func Target(b Backend, o Options) (*probev1.Target, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	host, port, err := b.hostPort()
	if err != nil {
		return nil, err
	}
	p := &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
			Host: host,
			Port: port,
			Path: ProbePath,
			HttpHeaders: []*probev1.HTTPHeader{
				{Name: ProbeHeader, Value: ProbeQueue},
				{Name: "User-Agent", Value: ProbeUserAgent},
			},
			ExpectedBody: ProbeQueue,
		}},
		FailureThreshold: o.FailureThreshold,
	}
	p.PeriodSeconds, p.PeriodMilliseconds = durationFields(o.Period)
	p.TimeoutSeconds, p.TimeoutMilliseconds = durationFields(o.Timeout)
	s, ms := durationFields(o.InitialPeriod)
	p.InitialPeriodSeconds, p.InitialPeriodMilliseconds = &s, ms
	return &probev1.Target{Name: b.Name, Labels: o.Labels, ReadinessProbe: p}, nil
}

// durationFields splits d (a whole number of milliseconds, > 0) into the
// seconds and milliseconds fields of a probe (KEP-3066). The seconds part
// is never 0, because probed, like Kubernetes, defaults a period of 0 to
// 10 s and a timeout of 0 to 1 s before adding the milliseconds: 50 ms
// is 1 s - 950 ms, 1.5 s is 1 s + 500 ms.
func durationFields(d time.Duration) (seconds int32, milliseconds *int32) {
	s := int32(d / time.Second)
	ms := int32(d % time.Second / time.Millisecond)
	if s == 0 {
		s, ms = 1, ms-1000
	}
	if ms == 0 {
		return s, nil
	}
	return s, &ms
}
