package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// scaleMix is how many targets of each kind a run registers: by default
// half HTTP (half of those keeping their connection alive, probed's
// default, the other half with disableKeepAlive) and half TCP; fewer kept
// alive when the file descriptor limit would not hold them (the rest are
// HTTP with a new connection per probe). gRPC health and exec targets
// take their share from the TCP ones.
type scaleMix struct {
	HTTPKeepAlive     int `json:"http_keep_alive"`
	HTTPNewConnection int `json:"http_new_connection"`
	TCP               int `json:"tcp"`
	GRPC              int `json:"grpc,omitempty"`
	Exec              int `json:"exec,omitempty"`
	// KeepAliveLimit is the most kept-alive connections the file
	// descriptor limit allows (0: none applied).
	KeepAliveLimit int `json:"keep_alive_limit,omitempty"`
}

// mixShares are the shares of a mix: http, grpc and exec of all targets
// (the rest TCP), keepAlive of the HTTP ones.
type mixShares struct {
	http, keepAlive, grpc, exec float64
}

// newScaleMix returns the mix of n targets by shares, at most
// keepAliveLimit kept alive (0: no limit).
func newScaleMix(n int, sh mixShares, keepAliveLimit int) scaleMix {
	http := int(math.Round(float64(n) * sh.http))
	m := scaleMix{
		HTTPKeepAlive: int(math.Round(float64(http) * sh.keepAlive)),
		GRPC:          int(math.Round(float64(n) * sh.grpc)),
		Exec:          int(math.Round(float64(n) * sh.exec)),
	}
	m.TCP = n - http - m.GRPC - m.Exec
	if keepAliveLimit > 0 && m.HTTPKeepAlive > keepAliveLimit {
		m.HTTPKeepAlive, m.KeepAliveLimit = keepAliveLimit, keepAliveLimit
	}
	m.HTTPNewConnection = http - m.HTTPKeepAlive
	return m
}

// targetKind is what a target of the mix probes.
type targetKind int

const (
	kindTCP targetKind = iota
	kindHTTPKeepAlive
	kindHTTPNewConnection
	kindGRPC
	kindExec
)

// kind returns the kind of target i of the mix: the HTTP targets are
// spread evenly among the others, the first HTTPKeepAlive of them kept
// alive, and the gRPC, then the exec targets evenly among those that are
// not HTTP.
func (m scaleMix) kind(i int) targetKind {
	h := m.HTTPKeepAlive + m.HTTPNewConnection
	n := h + m.TCP + m.GRPC + m.Exec
	before := i * h / n // HTTP targets before i
	if (i+1)*h/n != before {
		if before < m.HTTPKeepAlive {
			return kindHTTPKeepAlive
		}
		return kindHTTPNewConnection
	}
	j, rest := i-before, n-h // j-th of the rest
	if evenly(j, m.GRPC, rest) {
		return kindGRPC
	}
	j, rest = j-j*m.GRPC/rest, rest-m.GRPC // j-th of the rest but gRPC
	if rest > 0 && evenly(j, m.Exec, rest) {
		return kindExec
	}
	return kindTCP
}

// evenly reports whether item j of n is one of k spread evenly among them.
func evenly(j, k, n int) bool { return (j+1)*k/n != j*k/n }

// execCommand is what the exec targets run.
var execCommand = []string{"true"}

// scaleTarget is target i of mix: one readiness probe of 127.0.0.1:port
// (or an exec probe) every period.
func scaleTarget(i int, mix scaleMix, port int, period time.Duration) *probev1.Target {
	name := fmt.Sprintf("scale-%06d", i)
	p := &probev1.Probe{}
	switch mix.kind(i) {
	case kindHTTPKeepAlive, kindHTTPNewConnection:
		return httpTarget(name, port, period, mix.kind(i) == kindHTTPNewConnection)
	case kindGRPC:
		p.Handler = &probev1.Probe_Grpc{Grpc: &probev1.GRPCAction{Host: "127.0.0.1", Port: int32(port)}}
	case kindExec:
		p.Handler = &probev1.Probe_Exec{Exec: &probev1.ExecAction{Command: execCommand}}
	default:
		p.Handler = &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: int32(port)}}
	}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(period)
	return &probev1.Target{Name: name, ReadinessProbe: p}
}

// String describes the mix: "250 HTTP kept alive, 250 HTTP new
// connection, 500 TCP", kinds with no target left out.
func (m scaleMix) String() string {
	var parts []string
	for _, k := range []struct {
		n    int
		name string
	}{{m.HTTPKeepAlive, "HTTP kept alive"}, {m.HTTPNewConnection, "HTTP new connection"}, {m.TCP, "TCP"}, {m.GRPC, "gRPC"}, {m.Exec, "exec"}} {
		if k.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k.n, k.name))
		}
	}
	return strings.Join(parts, ", ")
}
