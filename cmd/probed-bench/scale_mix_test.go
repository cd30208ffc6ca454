package main

import (
	"strings"
	"testing"
)

func TestScaleMix(t *testing.T) {
	tests := []struct {
		name            string
		n               int
		http, keepAlive float64
		limit           int
		want            scaleMix
	}{
		{name: "even", n: 1000, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "odd", n: 7, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 2, HTTPNewConnection: 2, TCP: 3}},
		{name: "one", n: 1, http: 0.5, keepAlive: 0.5, want: scaleMix{HTTPKeepAlive: 1}},
		{name: "TCP only", n: 10, http: 0, keepAlive: 0.5, want: scaleMix{TCP: 10}},
		{name: "HTTP only, all kept alive", n: 10, http: 1, keepAlive: 1, want: scaleMix{HTTPKeepAlive: 10}},
		{name: "uneven shares", n: 1000, http: 0.3, keepAlive: 0.1, want: scaleMix{HTTPKeepAlive: 30, HTTPNewConnection: 270, TCP: 700}},
		{name: "under the limit", n: 1000, http: 0.5, keepAlive: 0.5, limit: 300, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "over the limit", n: 100_000, http: 0.5, keepAlive: 0.5, limit: 17_000,
			want: scaleMix{HTTPKeepAlive: 17_000, HTTPNewConnection: 33_000, TCP: 50_000, KeepAliveLimit: 17_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newScaleMix(tt.n, tt.http, tt.keepAlive, tt.limit)
			if m != tt.want {
				t.Fatalf("newScaleMix(%d, %v, %v, %d) = %+v, want %+v", tt.n, tt.http, tt.keepAlive, tt.limit, m, tt.want)
			}
			var got scaleMix
			for i := range tt.n {
				switch http, keepAlive := m.kind(i); {
				case !http:
					got.TCP++
				case keepAlive:
					got.HTTPKeepAlive++
				default:
					got.HTTPNewConnection++
				}
			}
			got.KeepAliveLimit = m.KeepAliveLimit
			if got != m {
				t.Errorf("kind() over %d targets counts %+v, want %+v", tt.n, got, m)
			}
		})
	}
}

func TestScaleTarget(t *testing.T) {
	m := newScaleMix(4, 0.5, 0.5, 0) // TCP, HTTP kept alive, TCP, HTTP new connection
	tests := []struct {
		i          int
		wantHTTP   bool
		wantNoKeep bool
	}{{0, false, false}, {1, true, false}, {2, false, false}, {3, true, true}}
	for _, tt := range tests {
		tg := scaleTarget(tt.i, m, 8080, 10_000_000_000)
		p := tg.GetReadinessProbe()
		if got := p.GetHttpGet() != nil; got != tt.wantHTTP {
			t.Errorf("target %d: HTTP = %v, want %v", tt.i, got, tt.wantHTTP)
		}
		if !tt.wantHTTP && p.GetTcpSocket().GetPort() != 8080 {
			t.Errorf("target %d: %v, want a TCP probe of port 8080", tt.i, p)
		}
		if p.GetHttpGet().GetDisableKeepAlive() != tt.wantNoKeep {
			t.Errorf("target %d: disableKeepAlive = %v, want %v", tt.i, p.GetHttpGet().GetDisableKeepAlive(), tt.wantNoKeep)
		}
		if p.GetPeriodSeconds() != 10 || p.PeriodMilliseconds != nil || !strings.HasPrefix(tg.GetName(), "scale-") {
			t.Errorf("target %d: %v, want scale-… every 10s", tt.i, tg)
		}
	}
}
