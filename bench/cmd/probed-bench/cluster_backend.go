package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// backendMode is how one target of a backend answers.
type backendMode int32

const (
	backendUp   backendMode = iota // 200 to every probe
	backendDown                    // 503 to every probe
	backendFlap                    // 200 and 503 in turn, probe by probe
)

// backend serves the HTTP targets of the cluster benchmark on one loopback
// listener of the benchmark process: target i is GET /t/i. It records when
// each target is probed, so that the benchmark can time a failover (the
// first probe after a kill) and a transition (the first probe that sees a
// flipped answer).
type backend struct {
	srv     *http.Server
	port    int
	targets []backendTarget
}

// backendTarget is the state of one target. Times are Unix nanoseconds.
type backendTarget struct {
	mode     atomic.Int32
	requests atomic.Int64
	// since and first time one event: first is the first request at or
	// after since (0 while none has come).
	since atomic.Int64
	first atomic.Int64
}

// startBackend listens on a free loopback port and serves n targets, all
// in mode.
func startBackend(n int, mode backendMode) (*backend, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{port: lis.Addr().(*net.TCPAddr).Port, targets: make([]backendTarget, n)}
	for i := range b.targets {
		b.targets[i].mode.Store(int32(mode))
		b.targets[i].since.Store(time.Now().UnixNano())
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(lis) }()
	return b, nil
}

// close stops serving and closes every connection.
func (b *backend) close() error { return b.srv.Close() }

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/t/"))
	if err != nil || i < 0 || i >= len(b.targets) {
		http.NotFound(w, r)
		return
	}
	if b.targets[i].serve(time.Now().UnixNano()) {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// serve records a request at now and returns whether it succeeds.
func (t *backendTarget) serve(now int64) bool {
	n := t.requests.Add(1)
	if now >= t.since.Load() {
		t.first.CompareAndSwap(0, now)
	}
	switch backendMode(t.mode.Load()) {
	case backendUp:
		return true
	case backendFlap:
		return n%2 == 0
	default:
		return false
	}
}

// markFrom starts timing the first request of target i at or after at.
func (b *backend) markFrom(i int, at time.Time) {
	t := &b.targets[i]
	t.first.Store(0)
	t.since.Store(at.UnixNano())
}

// flip sets target i's mode and starts timing its first request after
// now, the first that sees the new answer; it returns now.
func (b *backend) flip(i int, mode backendMode) time.Time {
	now := time.Now()
	b.markFrom(i, now)
	b.targets[i].mode.Store(int32(mode))
	return now
}

// firstSince returns the time of target i's first request after the last
// markFrom or flip, and false if none has come yet.
func (b *backend) firstSince(i int) (time.Time, bool) {
	ns := b.targets[i].first.Load()
	return time.Unix(0, ns), ns != 0
}

// requests returns the number of requests target i has had.
func (b *backend) requests(i int) int64 { return b.targets[i].requests.Load() }

// target is the spec of target i: an HTTP readiness probe of the backend
// every period, one success or failure to change state, so that every
// flip of the answer is one transition.
func (b *backend) target(name string, i int, period time.Duration, labels map[string]string) *probev1.Target {
	p := &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
			Host: "127.0.0.1", Port: int32(b.port), Path: fmt.Sprintf("/t/%d", i),
		}},
		SuccessThreshold: 1, FailureThreshold: 1,
	}
	p.PeriodSeconds, p.PeriodMilliseconds = client.ProbeDuration(period)
	return &probev1.Target{Name: name, Labels: labels, ReadinessProbe: p}
}
