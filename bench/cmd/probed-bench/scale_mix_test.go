package main

import (
	"slices"
	"strings"
	"testing"
)

func TestScaleMix(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		shares mixShares
		limit  int
		want   scaleMix
	}{
		{name: "even", n: 1000, shares: mixShares{http: 0.5, keepAlive: 0.5}, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "odd", n: 7, shares: mixShares{http: 0.5, keepAlive: 0.5}, want: scaleMix{HTTPKeepAlive: 2, HTTPNewConnection: 2, TCP: 3}},
		{name: "one", n: 1, shares: mixShares{http: 0.5, keepAlive: 0.5}, want: scaleMix{HTTPKeepAlive: 1}},
		{name: "TCP only", n: 10, shares: mixShares{keepAlive: 0.5}, want: scaleMix{TCP: 10}},
		{name: "HTTP only, all kept alive", n: 10, shares: mixShares{http: 1, keepAlive: 1}, want: scaleMix{HTTPKeepAlive: 10}},
		{name: "uneven shares", n: 1000, shares: mixShares{http: 0.3, keepAlive: 0.1}, want: scaleMix{HTTPKeepAlive: 30, HTTPNewConnection: 270, TCP: 700}},
		{name: "under the limit", n: 1000, shares: mixShares{http: 0.5, keepAlive: 0.5}, limit: 300, want: scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500}},
		{name: "over the limit", n: 100_000, shares: mixShares{http: 0.5, keepAlive: 0.5}, limit: 17_000,
			want: scaleMix{HTTPKeepAlive: 17_000, HTTPNewConnection: 33_000, TCP: 50_000, KeepAliveLimit: 17_000}},
		{name: "gRPC only", n: 10, shares: mixShares{grpc: 1}, want: scaleMix{GRPC: 10}},
		{name: "exec only", n: 9, shares: mixShares{exec: 1}, want: scaleMix{Exec: 9}},
		{name: "every kind", n: 1000, shares: mixShares{http: 0.4, keepAlive: 0.5, grpc: 0.2, exec: 0.1},
			want: scaleMix{HTTPKeepAlive: 200, HTTPNewConnection: 200, TCP: 300, GRPC: 200, Exec: 100}},
		{name: "every kind, odd", n: 13, shares: mixShares{http: 0.25, keepAlive: 0.5, grpc: 0.25, exec: 0.25},
			want: scaleMix{HTTPKeepAlive: 2, HTTPNewConnection: 1, TCP: 4, GRPC: 3, Exec: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newScaleMix(tt.n, tt.shares, tt.limit)
			if m != tt.want {
				t.Fatalf("newScaleMix(%d, %+v, %d) = %+v, want %+v", tt.n, tt.shares, tt.limit, m, tt.want)
			}
			var got scaleMix
			kinds := make([]targetKind, tt.n)
			for i := range tt.n {
				kinds[i] = m.kind(i)
				switch kinds[i] {
				case kindTCP:
					got.TCP++
				case kindHTTPKeepAlive:
					got.HTTPKeepAlive++
				case kindHTTPNewConnection:
					got.HTTPNewConnection++
				case kindGRPC:
					got.GRPC++
				case kindExec:
					got.Exec++
				}
			}
			got.KeepAliveLimit = m.KeepAliveLimit
			if got != m {
				t.Errorf("kind() over %d targets counts %+v, want %+v", tt.n, got, m)
			}
			// Spread: of 100 targets or more, no kind of at least a tenth
			// of them has its first one past the first fifth (but the HTTP
			// targets not kept alive, which come after those kept alive).
			for _, k := range []targetKind{kindTCP, kindHTTPKeepAlive, kindGRPC, kindExec} {
				if c := count(kinds, k); tt.n >= 100 && c*10 >= tt.n && slices.Index(kinds, k)*5 > tt.n {
					t.Errorf("kind %d first at %d of %d: not spread (%v)", k, slices.Index(kinds, k), tt.n, kinds[:min(tt.n, 20)])
				}
			}
		})
	}
}

func count(kinds []targetKind, k targetKind) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

func TestScaleMixString(t *testing.T) {
	m := scaleMix{HTTPKeepAlive: 250, HTTPNewConnection: 250, TCP: 500, GRPC: 0, Exec: 3}
	if got, want := m.String(), "250 HTTP kept alive, 250 HTTP new connection, 500 TCP, 3 exec"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestScaleTarget(t *testing.T) {
	m := newScaleMix(4, mixShares{http: 0.5, keepAlive: 0.5}, 0) // TCP, HTTP kept alive, TCP, HTTP new connection
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
	e := scaleTarget(0, newScaleMix(2, mixShares{grpc: 0.5, exec: 0.5}, 0), 8080, 10_000_000_000)
	g := scaleTarget(1, newScaleMix(2, mixShares{grpc: 0.5, exec: 0.5}, 0), 8080, 10_000_000_000)
	if g.GetReadinessProbe().GetGrpc().GetPort() != 8080 || !slices.Equal(e.GetReadinessProbe().GetExec().GetCommand(), execCommand) {
		t.Errorf("gRPC and exec targets: %v, %v", g, e)
	}
}
