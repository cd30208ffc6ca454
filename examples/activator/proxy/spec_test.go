package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/probed/probed/examples/activator/proxy"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func ptr[T any](v T) *T { return &v }

func TestTarget(t *testing.T) {
	t.Parallel()
	knative := func(period int32, periodMS *int32, mod func(p *probev1.Probe)) *probev1.Target {
		p := &probev1.Probe{
			Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
				Host: "127.0.0.1", Port: 8081, Path: "/healthz",
				HttpHeaders: []*probev1.HTTPHeader{
					{Name: "K-Network-Probe", Value: "queue"},
					{Name: "User-Agent", Value: "Knative-Activator-Probe"},
				},
				ExpectedBody: "queue",
			}},
			PeriodSeconds:             period,
			PeriodMilliseconds:        periodMS,
			TimeoutSeconds:            1,
			TimeoutMilliseconds:       ptr[int32](-700),
			InitialPeriodSeconds:      ptr[int32](1),
			InitialPeriodMilliseconds: ptr[int32](-950),
		}
		if mod != nil {
			mod(p)
		}
		return &probev1.Target{
			Name:           "hello",
			Labels:         map[string]string{proxy.ManagedByLabel: "probed-activator"},
			ReadinessProbe: p,
		}
	}
	tests := []struct {
		name string
		opts proxy.Options
		want *probev1.Target
	}{
		{
			name: "defaults: 50ms until ready, then 1s; 300ms timeout",
			want: knative(1, nil, nil),
		},
		{
			name: "sub-second period: seconds 1, milliseconds negative (0 would default to 10s)",
			opts: proxy.Options{Period: 200 * time.Millisecond},
			want: knative(1, ptr[int32](-800), nil),
		},
		{
			name: "period above a second",
			opts: proxy.Options{Period: 2500 * time.Millisecond, FailureThreshold: 1},
			want: knative(2, ptr[int32](500), func(p *probev1.Probe) { p.FailureThreshold = 1 }),
		},
		{
			name: "whole seconds",
			opts: proxy.Options{InitialPeriod: time.Second, Timeout: 2 * time.Second},
			want: knative(1, nil, func(p *probev1.Probe) {
				p.InitialPeriodMilliseconds, p.TimeoutSeconds, p.TimeoutMilliseconds = nil, 2, nil
			}),
		},
		{
			name: "labels",
			opts: proxy.Options{Labels: map[string]string{"team": "a"}},
			want: func() *probev1.Target {
				t := knative(1, nil, nil)
				t.Labels = map[string]string{"team": "a"}
				return t
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := proxy.Target(proxy.Backend{Name: "hello", Addr: "127.0.0.1:8081"}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Target mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTargetErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		backend proxy.Backend
		opts    proxy.Options
		want    string
	}{
		{"name not a DNS label", proxy.Backend{Name: "Hello", Addr: "127.0.0.1:1"}, proxy.Options{}, "DNS-1123"},
		{"no port", proxy.Backend{Name: "a", Addr: "127.0.0.1"}, proxy.Options{}, "missing port"},
		{"port 0", proxy.Backend{Name: "a", Addr: "127.0.0.1:0"}, proxy.Options{}, "port from 1 to 65535"},
		{"fraction of a millisecond", proxy.Backend{Name: "a", Addr: "h:1"}, proxy.Options{Period: 1500 * time.Microsecond}, "Options.Period"},
		{"negative timeout", proxy.Backend{Name: "a", Addr: "h:1"}, proxy.Options{Timeout: -time.Second}, "Options.Timeout"},
		{"negative threshold", proxy.Backend{Name: "a", Addr: "h:1"}, proxy.Options{FailureThreshold: -1}, "FailureThreshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := proxy.Target(tt.backend, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Target(%+v): got error %v, want one containing %q", tt.backend, err, tt.want)
			}
		})
	}
}

func TestParseBackend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    proxy.Backend
		wantErr bool
	}{
		{in: "hello=127.0.0.1:8081", want: proxy.Backend{Name: "hello", Addr: "127.0.0.1:8081"}},
		{in: "v6=[::1]:80", want: proxy.Backend{Name: "v6", Addr: "[::1]:80"}},
		{in: "hello", wantErr: true},
		{in: "hello=:80", wantErr: true},
		{in: "=127.0.0.1:80", wantErr: true},
		{in: "x=127.0.0.1:99999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := proxy.ParseBackend(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseBackend(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
