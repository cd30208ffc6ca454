package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/refused"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

func httpTarget(name, host string, port int32, path string) *probev1.Target {
	return &probev1.Target{Name: name, ReadinessProbe: &probev1.Probe{
		Handler: &probev1.Probe_HttpGet{HttpGet: &probev1.HTTPGetAction{Host: host, Port: port, Path: path}},
	}}
}

// TestProbesOfOwnListenersAreRefused: 20 targets probing probed's own
// status-page event stream took probed from 8% to 72% of a core (each
// probe made it serve a stream: a snapshot of every target and the recent
// past). Probes of the status page and metrics listeners are refused at
// create (a literal address or localhost: a field error naming the flag)
// and at dial time (a name), unless --allow-self-probes.
func TestProbesOfOwnListenersAreRefused(t *testing.T) {
	t.Parallel()
	ui, metrics := refused.Reserve(t).Addr(), refused.Reserve(t).Addr()
	addr := startServer(t, testConfig(t, "--ui-addr", ui, "--metrics-addr", metrics))
	c := dialClient(t, addr)
	tests := []struct {
		name string
		tg   *probev1.Target
		flag string // named in the error
	}{
		{name: "the event stream", tg: httpTarget("events", "127.0.0.1", port(t, ui), "/api/events"), flag: "--ui-addr"},
		{name: "the status page by localhost", tg: httpTarget("page", "localhost", port(t, ui), "/"), flag: "--ui-addr"},
		{name: "its port over TCP", tg: tcpTarget("page-tcp", "127.0.0.1", port(t, ui)), flag: "--ui-addr"},
		{name: "the metrics", tg: httpTarget("metrics", "127.0.0.1", port(t, metrics), "/metrics"), flag: "--metrics-addr"},
	}
	for _, tt := range tests {
		_, err := c.Create(callCtx(t), tt.tg)
		var inv *client.InvalidError
		if !errors.As(err, &inv) || len(inv.Violations) != 1 || !strings.HasSuffix(inv.Violations[0].Field, ".host") ||
			!strings.Contains(inv.Violations[0].Description, tt.flag) || !strings.Contains(inv.Violations[0].Description, "--allow-self-probes") {
			t.Errorf("%s: %v, want a field error at the host naming %s and --allow-self-probes", tt.name, err, tt.flag)
		}
	}
	// The API itself stays a valid target (README's first example).
	if _, err := c.Create(callCtx(t), tcpTarget("api", "127.0.0.1", port(t, addr))); err != nil {
		t.Errorf("a probe of the API's port: %v", err)
	}

	// Allowed: created, and the probe connects and reads the stream (an
	// empty probed's is short of 10 KiB: the probe times out reading it).
	ui2 := refused.Reserve(t).Addr()
	c2 := dialClient(t, startServer(t, testConfig(t, "--ui-addr", ui2, "--allow-self-probes")))
	if _, err := c2.Create(callCtx(t), httpTarget("events", "127.0.0.1", port(t, ui2), "/api/events")); err != nil {
		t.Fatalf("with --allow-self-probes: %v", err)
	}
	resp, err := c2.Trigger(callCtx(t), "events", probev1.ProbeType_PROBE_TYPE_READINESS)
	if err != nil {
		t.Fatal(err)
	}
	if msg := resp.GetOutcome().GetMessage(); strings.Contains(msg, "own listener") || !strings.Contains(msg, "reading the body") {
		t.Errorf("probe of the event stream with --allow-self-probes: %q, want it to read the stream", msg)
	}
}
