package telemetry_test

import (
	"context"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/telemetry"
)

// TestPrometheusEndToEnd runs a real probed with a Telemetry, probes a
// real HTTP and TCP target through startup, liveness and readiness, makes
// readiness flip both ways, watches, deletes a target, then scrapes the
// Prometheus endpoint over HTTP and checks every family and label value an
// operator relies on.
func TestPrometheusEndToEnd(t *testing.T) {
	tel := newTelemetry(t, telemetry.Config{Prometheus: true, Version: "v0.1.0-test"})
	s := startProbed(t, tel)
	metrics := httptest.NewServer(tel.Handler())
	t.Cleanup(metrics.Close)
	c := probev1.NewProbeServiceClient(s.Conn)
	b := probedtest.NewBackend(t, true)

	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	stream, err := c.Watch(watchCtx, &probev1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the snapshot
		t.Fatal(err)
	}

	web := &probev1.Target{
		Name:           "web",
		StartupProbe:   tcpProbe(b),
		LivenessProbe:  httpProbe(b, "/healthz"),
		ReadinessProbe: httpProbe(b, "/healthz"),
	}
	if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: web}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "web", func(tg *probev1.Target) bool { return tg.GetStatus().GetReady() })
	b.SetHealthy(false)
	waitFor(t, c, "web", func(tg *probev1.Target) bool {
		return !tg.GetStatus().GetReady() && tg.GetStatus().GetReadiness().GetProbesTotal() >= 3
	})
	if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTarget(t.Context(), &probev1.DeleteTargetRequest{Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // at least one live event sent
		t.Fatal(err)
	}

	fams, text := scrape(t, metrics.URL)
	type series struct {
		family string
		typ    dto.MetricType
		labels []string
		min    float64 // the value (histograms: the count) is at least this
	}
	for _, tt := range []series{
		// Kubelet's families, failed probes timed too.
		{"prober_probe_total", dto.MetricType_COUNTER, []string{"probe_type", "Startup", "result", "successful"}, 1},
		{"prober_probe_total", dto.MetricType_COUNTER, []string{"probe_type", "Liveness", "result", "successful"}, 1},
		{"prober_probe_total", dto.MetricType_COUNTER, []string{"probe_type", "Readiness", "result", "successful"}, 1},
		{"prober_probe_total", dto.MetricType_COUNTER, []string{"probe_type", "Readiness", "result", "failed"}, 1},
		{"prober_probe_total", dto.MetricType_COUNTER, []string{"probe_type", "Readiness", "result", "unknown"}, 0},
		{"prober_probe_duration_seconds", dto.MetricType_HISTOGRAM, []string{"probe_type", "Readiness", "result", "successful"}, 1},
		{"prober_probe_duration_seconds", dto.MetricType_HISTOGRAM, []string{"probe_type", "Readiness", "result", "failed"}, 1},
		// Probing.
		{"probed_http_probe_phase_seconds", dto.MetricType_HISTOGRAM, []string{"phase", "connect"}, 1},
		{"probed_http_probe_phase_seconds", dto.MetricType_HISTOGRAM, []string{"phase", "first_byte"}, 1},
		{"probed_transitions_total", dto.MetricType_COUNTER, []string{"probe_type", "Startup", "from", "unknown", "to", "success"}, 1},
		{"probed_transitions_total", dto.MetricType_COUNTER, []string{"probe_type", "Readiness", "from", "failure", "to", "success"}, 1},
		{"probed_transitions_total", dto.MetricType_COUNTER, []string{"probe_type", "Readiness", "from", "success", "to", "failure"}, 1},
		{"probed_readiness_latency_seconds", dto.MetricType_HISTOGRAM, nil, 1},
		// The engine.
		{"probed_targets", dto.MetricType_GAUGE, []string{"phase", "active"}, 1},
		{"probed_targets", dto.MetricType_GAUGE, []string{"phase", "terminating"}, 0},
		{"probed_probes_scheduled", dto.MetricType_GAUGE, nil, 2},
		{"probed_probes_inflight", dto.MetricType_GAUGE, nil, 0},
		{"probed_probes_cancelling", dto.MetricType_GAUGE, nil, 0},
		{"probed_scheduler_lateness_seconds", dto.MetricType_HISTOGRAM, nil, 1},
		{"probed_scheduler_fires_total", dto.MetricType_COUNTER, nil, 1},
		{"probed_scheduler_skipped_total", dto.MetricType_COUNTER, []string{"reason", "overlap"}, 0},
		{"probed_scheduler_skipped_total", dto.MetricType_COUNTER, []string{"reason", "busy"}, 0},
		{"probed_scheduler_missed_total", dto.MetricType_COUNTER, nil, 0},
		{"probed_scheduler_wakes_total", dto.MetricType_COUNTER, nil, 1},
		{"probed_scheduler_errors_total", dto.MetricType_COUNTER, nil, 0},
		{"probed_checker_panics_total", dto.MetricType_COUNTER, nil, 0},
		{"probed_store_commit_seconds", dto.MetricType_HISTOGRAM, nil, 1},
		{"probed_store_changes_total", dto.MetricType_COUNTER, nil, 1},
		// Watch.
		{"probed_watchers", dto.MetricType_GAUGE, nil, 1},
		{"probed_watch_events_sent_total", dto.MetricType_COUNTER, nil, 1},
		{"probed_watch_evictions_total", dto.MetricType_COUNTER, nil, 0},
		// The build.
		{"probed_build_info", dto.MetricType_GAUGE, []string{"version", "v0.1.0-test", "goversion", runtime.Version()}, 1},
	} {
		fam := fams[tt.family]
		if fam == nil {
			t.Errorf("no family %s in the scrape", tt.family)
			continue
		}
		if fam.GetType() != tt.typ {
			t.Errorf("%s is a %v, want a %v", tt.family, fam.GetType(), tt.typ)
		}
		m := find(fam, tt.labels...)
		if m == nil {
			t.Errorf("%s has no series %v", tt.family, tt.labels)
			continue
		}
		if v := value(m); v < tt.min {
			t.Errorf("%s%v = %v, want at least %v", tt.family, tt.labels, v, tt.min)
		}
	}

	// The lateness histogram has the wheel's buckets.
	if m := find(fams["probed_scheduler_lateness_seconds"]); m != nil {
		var bounds []float64
		for _, b := range m.GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		want := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}
		if len(bounds) < len(want) || bounds[0] != want[0] || bounds[len(want)-1] != want[len(want)-1] {
			t.Errorf("lateness buckets %v, want %v (+Inf)", bounds, want)
		}
	}
	// No per-target label by default, no scope noise.
	for _, f := range []string{"prober_probe_total", "prober_probe_duration_seconds", "probed_transitions_total"} {
		for _, m := range fams[f].GetMetric() {
			if label(m, "target") != "" {
				t.Errorf("%s has a target label without TargetLabel", f)
			}
		}
	}
	if strings.Contains(text, "otel_scope_") {
		t.Error("the scrape has otel_scope_ labels")
	}
	// gRPC server metrics from otelgrpc.
	var rpc bool
	for name := range fams {
		rpc = rpc || strings.HasPrefix(name, "rpc_server_")
	}
	if !rpc {
		t.Error("no rpc_server_ family in the scrape")
	}
	// The process' own.
	for _, f := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[f] == nil {
			t.Errorf("no family %s", f)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// TestTargetLabel checks that TargetLabel adds the target to the per-probe
// families.
func TestTargetLabel(t *testing.T) {
	tel := newTelemetry(t, telemetry.Config{Prometheus: true, TargetLabel: true})
	s := startProbed(t, tel)
	metrics := httptest.NewServer(tel.Handler())
	t.Cleanup(metrics.Close)
	c := probev1.NewProbeServiceClient(s.Conn)
	b := probedtest.NewBackend(t, true)
	if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "web", ReadinessProbe: httpProbe(b, "/healthz")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "web", func(tg *probev1.Target) bool { return tg.GetStatus().GetReady() })

	fams, text := scrape(t, metrics.URL)
	for _, tt := range []struct {
		family string
		labels []string
	}{
		{"prober_probe_total", []string{"target", "web", "probe_type", "Readiness", "result", "successful"}},
		{"prober_probe_duration_seconds", []string{"target", "web", "probe_type", "Readiness", "result", "successful"}},
		{"probed_http_probe_phase_seconds", []string{"target", "web", "phase", "first_byte"}},
		{"probed_transitions_total", []string{"target", "web", "probe_type", "Readiness", "from", "failure", "to", "success"}},
		{"probed_readiness_latency_seconds", []string{"target", "web"}},
	} {
		if m := find(fams[tt.family], tt.labels...); value(m) < 1 {
			t.Errorf("%s has no series %v with a value", tt.family, tt.labels)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}
