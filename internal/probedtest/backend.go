package probedtest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// Backend is a real HTTP server on loopback whose /healthz answers 200
// while it is healthy and 503 otherwise: a target to probe whose health a
// test flips. It is closed when the test ends.
type Backend struct {
	srv     *httptest.Server
	healthy atomic.Bool

	mu       sync.Mutex
	requests int         // guarded by mu
	last     http.Header // of the last request; guarded by mu
}

// NewBackend starts a backend.
func NewBackend(t testing.TB, healthy bool) *Backend {
	t.Helper()
	b := &Backend{}
	b.healthy.Store(healthy)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.requests++
		b.last = r.Header.Clone()
		b.mu.Unlock()
		if r.URL.Path == "/healthz" && b.healthy.Load() {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// SetHealthy makes /healthz answer 200 (true) or 503 (false).
func (b *Backend) SetHealthy(healthy bool) { b.healthy.Store(healthy) }

// Requests returns how many requests the backend got and a header of the
// last one ("" before any).
func (b *Backend) Requests(header string) (n int, last string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests, b.last.Get(header)
}

// Port is the backend's port on 127.0.0.1.
func (b *Backend) Port() int32 {
	_, p, _ := net.SplitHostPort(b.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// Probe returns an HTTP probe of path every 100 ms (1 s - 900 ms).
func (b *Backend) Probe(path string) *probev1.Probe {
	ms := int32(-900)
	return &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{
			Host: "127.0.0.1", Port: b.Port(), Path: path,
		}},
		PeriodSeconds:      1,
		PeriodMilliseconds: &ms,
	}
}

// Readiness returns a target named name whose readiness probe GETs the
// backend's /healthz every 100 ms.
func (b *Backend) Readiness(name string) *probev1.Target {
	return &probev1.Target{Name: name, ReadinessProbe: b.Probe("/healthz")}
}
