package proxy

import (
	"github.com/probed/probed/client"
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
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(o.Period)
	p.TimeoutSeconds, p.TimeoutMilliseconds = client.ProbeDuration(o.Timeout)
	s, ms := client.ProbeDuration(o.InitialPeriod)
	p.InitialPeriodSeconds, p.InitialPeriodMilliseconds = &s, ms
	return &probev1.Target{Name: b.Name, Labels: o.Labels, ReadinessProbe: p}, nil
}
