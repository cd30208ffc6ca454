package xds

import (
	"net/netip"
	"testing"

	"github.com/probed/probed/engine/probe"
)

func TestEndpointOf(t *testing.T) {
	tcp := func(host string, port int32) *probe.Spec {
		return &probe.Spec{Handler: probe.Handler{TCPSocket: &probe.TCPSocket{Host: host, Port: port}}}
	}
	for _, tc := range []struct {
		name   string
		probe  *probe.Spec
		labels map[string]string
		want   string // address, or the reason
	}{
		{"tcp", tcp("10.0.0.1", 8080), nil, "10.0.0.1:8080"},
		{"http", &probe.Spec{Handler: probe.Handler{HTTPGet: &probe.HTTPGet{Host: "10.0.0.2", Port: 80}}}, nil, "10.0.0.2:80"},
		{"grpc", &probe.Spec{Handler: probe.Handler{GRPC: &probe.GRPC{Host: "10.0.0.3", Port: 9090}}}, nil, "10.0.0.3:9090"},
		{"ipv6", tcp("::1", 80), nil, "[::1]:80"},
		{"bracketed ipv6", tcp("[fd00::1]", 80), nil, "[fd00::1]:80"},
		{"ipv4-mapped", tcp("::ffff:10.0.0.1", 80), nil, "10.0.0.1:80"},
		{"serving port", tcp("10.0.0.1", 8080), map[string]string{LabelServingPort: "9000"}, "10.0.0.1:9000"},
		{"bad serving port", tcp("10.0.0.1", 8080), map[string]string{LabelServingPort: "http"}, ReasonBadPort},
		{"zero serving port", tcp("10.0.0.1", 8080), map[string]string{LabelServingPort: "0"}, ReasonBadPort},
		{"serving port too large", tcp("10.0.0.1", 8080), map[string]string{LabelServingPort: "65536"}, ReasonBadPort},
		{"dns name", tcp("web.example", 80), nil, ReasonHostNotAnIP},
		{"localhost", tcp("localhost", 80), nil, ReasonHostNotAnIP},
		{"zone", tcp("fe80::1%eth0", 80), nil, ReasonHostNotAnIP},
		{"unspecified", tcp("0.0.0.0", 80), nil, ReasonUnspecifiedIP},
		{"no host", tcp("", 80), nil, ReasonNoHost},
		{"exec", &probe.Spec{Handler: probe.Handler{Exec: &probe.Exec{Command: []string{"true"}}}}, nil, ReasonExecReadiness},
		{"no probe", nil, nil, ReasonNoReadiness},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, reason := endpointOf(tc.probe, tc.labels)
			got := reason
			if reason == "" {
				got = addr.String()
			} else if addr != (netip.AddrPort{}) {
				t.Errorf("address %v with reason %q", addr, reason)
			}
			if got != tc.want {
				t.Errorf("endpointOf = %q, want %q", got, tc.want)
			}
		})
	}
}
