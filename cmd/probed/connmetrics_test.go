package main

import (
	"fmt"
	"net"
	"testing"
	"time"

	probedtel "github.com/probed/probed/telemetry"

	"github.com/probed/probed/internal/poll"
)

// TestConnectionBoundsAreCounted: connections the API listener refuses
// over a bound, and those closed for making no authenticated call in
// time, show in /metrics, beside the connections open and pending now.
func TestConnectionBoundsAreCounted(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "--max-connections-per-ip", "1", "--first-call-timeout", "300ms")
	metricsAddr := make(chan net.Addr, 2)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	srv := runServer(t, cfg)
	maddr := (<-metricsAddr).String()

	first, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	waitMetric(t, maddr, probedtel.MetricConnectionsPending, func(v float64) bool { return v == 1 })
	// Over --max-connections-per-ip: closed at accept, with a reset that
	// may reach the dial itself.
	if second, err := net.Dial("tcp", srv.addr); err == nil {
		defer func() { _ = second.Close() }()
	}
	waitMetric(t, maddr, probedtel.MetricConnectionsRefused, func(v float64) bool { return v == 1 })
	// The first never calls: closed after --first-call-timeout.
	waitMetric(t, maddr, probedtel.MetricConnectionsExpired, func(v float64) bool { return v == 1 })
	waitMetric(t, maddr, probedtel.MetricConnectionsOpen, func(v float64) bool { return v == 0 })
}

// waitMetric waits up to 20 s for the metric name at addr to satisfy ok.
func waitMetric(t *testing.T, addr, name string, ok func(float64) bool) {
	t.Helper()
	poll.UntilMet(t, name, 20*time.Second, func() string {
		if v := scrapeMetric(t, addr, name); !ok(v) {
			return fmt.Sprintf("%s = %v after 20s", name, v)
		}
		return ""
	})
}
