package main

import (
	"fmt"
	"math"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// scaleMix is how many targets of each kind a run registers: by default
// half HTTP (half of those keeping their connection alive, probed's
// default, the other half with disableKeepAlive) and half TCP; fewer kept
// alive when the file descriptor limit would not hold them (the rest are
// HTTP with a new connection per probe).
type scaleMix struct {
	HTTPKeepAlive     int `json:"http_keep_alive"`
	HTTPNewConnection int `json:"http_new_connection"`
	TCP               int `json:"tcp"`
	// KeepAliveLimit is the most kept-alive connections the file
	// descriptor limit allows (0: none applied).
	KeepAliveLimit int `json:"keep_alive_limit,omitempty"`
}

// newScaleMix returns the mix of n targets, httpShare of them HTTP and
// keepAliveShare of those kept alive, at most keepAliveLimit (0: no
// limit).
func newScaleMix(n int, httpShare, keepAliveShare float64, keepAliveLimit int) scaleMix {
	http := int(math.Round(float64(n) * httpShare))
	m := scaleMix{HTTPKeepAlive: int(math.Round(float64(http) * keepAliveShare)), TCP: n - http}
	if keepAliveLimit > 0 && m.HTTPKeepAlive > keepAliveLimit {
		m.HTTPKeepAlive, m.KeepAliveLimit = keepAliveLimit, keepAliveLimit
	}
	m.HTTPNewConnection = http - m.HTTPKeepAlive
	return m
}

// kind returns the kind of target i of the mix: the HTTP targets are
// spread evenly among the TCP ones, the first HTTPKeepAlive of them kept
// alive.
func (m scaleMix) kind(i int) (http, keepAlive bool) {
	h := m.HTTPKeepAlive + m.HTTPNewConnection
	n := h + m.TCP
	before := i * h / n // HTTP targets before i
	if (i+1)*h/n == before {
		return false, false
	}
	return true, before < m.HTTPKeepAlive
}

// scaleTarget is target i of mix: one readiness probe of 127.0.0.1:port
// every period.
func scaleTarget(i int, mix scaleMix, port int, period time.Duration) *probev1.Target {
	name := fmt.Sprintf("scale-%06d", i)
	http, keepAlive := mix.kind(i)
	if http {
		return httpTarget(name, port, period, !keepAlive)
	}
	p := &probev1.Probe{Handler: &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: int32(port)}}}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(period)
	return &probev1.Target{Name: name, ReadinessProbe: p}
}
