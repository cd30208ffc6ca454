package server_test

import (
	"testing"

	"github.com/probed/probed/engine/target"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
)

func TestSpecValidatesAsTheServerDoes(t *testing.T) {
	tests := []struct {
		name  string
		probe *probev1.Probe
		want  []string // fields
	}{
		{name: "valid", probe: &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "10.0.0.1", Port: 80}}}},
		{name: "no port", probe: &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "10.0.0.1"}}}, want: []string{"target.readinessProbe.tcpSocket.port"}},
		{name: "no handler", probe: &probev1.Probe{PeriodSeconds: 1}, want: []string{"target.readinessProbe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := target.Validate(server.Spec(&probev1.Target{Name: "a", ReadinessProbe: tt.probe}), nil, target.Options{})
			var got []string
			for _, fe := range errs {
				got = append(got, fe.Field)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("fields %v; want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("fields %v; want %v", got, tt.want)
				}
			}
		})
	}
}
