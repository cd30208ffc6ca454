package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// startMetricsListener starts probed with args and returns the base URL of
// its metrics listener.
func startMetricsListener(t *testing.T, args ...string) string {
	t.Helper()
	cfg := testConfig(t, args...)
	metricsAddr := make(chan net.Addr, 1)
	cfg.telemetry.listening = func(a net.Addr) { metricsAddr <- a }
	startServer(t, cfg)
	return "http://" + (<-metricsAddr).String()
}

func TestPprofEndpoint(t *testing.T) {
	base := startMetricsListener(t, "--pprof")
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	tests := []struct {
		name, path string
		want       string // in the body
	}{
		{name: "index", path: "/debug/pprof/", want: "heap"},
		{name: "without the slash", path: "/debug/pprof", want: "heap"},
		{name: "heap", path: "/debug/pprof/heap?debug=1", want: "heap profile:"},
		// The server's own goroutines: the timer wheel's driver among them.
		{name: "goroutines", path: "/debug/pprof/goroutine?debug=2", want: "engine/wheel.(*Wheel).Run"},
		{name: "cmdline", path: "/debug/pprof/cmdline", want: "probed"},
		// A CPU profile is gzipped protobuf.
		{name: "cpu profile", path: "/debug/pprof/profile?seconds=1", want: "\x1f\x8b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := getWithToken(t, hc, base+tt.path, "")
			if code != http.StatusOK || !strings.Contains(body, tt.want) {
				t.Errorf("GET %s: %d, want 200 with %q:\n%.2000s", tt.path, code, tt.want, body)
			}
		})
	}
}

func TestPprofOffByDefault(t *testing.T) {
	base := startMetricsListener(t)
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	if code, _ := getWithToken(t, hc, base+"/debug/pprof/heap?debug=1", ""); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/heap without --pprof: %d, want 404", code)
	}
	if code, _ := getWithToken(t, hc, base+"/metrics", ""); code != http.StatusOK {
		t.Errorf("GET /metrics: %d, want 200", code)
	}
}
