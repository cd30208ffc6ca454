package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/telemetry"
)

// infoLogger is probed's default: text at info.
func infoLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

var httpOutcome = probe.Outcome{
	Result:  probe.Success,
	Latency: 3 * time.Millisecond,
	Phases:  probe.Phases{Connect: 200 * time.Microsecond, FirstByte: 2 * time.Millisecond},
}

// probeHotPath runs what the engine calls around every probe.
func probeHotPath(ctx context.Context, obs engine.Observer, out probe.Outcome) {
	pctx := obs.ProbeStarted(ctx, "web", probe.Readiness)
	obs.ProbeDone(pctx, "web", probe.Readiness, out)
}

// TestProbeHotPathAllocatesNothing guards BenchmarkProbeDone's 0 allocs/op:
// with metrics on and tracing off, observing a probe allocates nothing,
// with or without the target label (after the target's first probe).
func TestProbeHotPathAllocatesNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  telemetry.Config
	}{
		{"metrics", telemetry.Config{Prometheus: true, Logger: infoLogger()}},
		{"metrics with target label", telemetry.Config{Prometheus: true, TargetLabel: true, Logger: infoLogger()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obs := newTelemetry(t, tt.cfg).Observer()
			ctx := context.Background()
			for _, out := range []probe.Outcome{httpOutcome, {Result: probe.Failure, Message: "refused", Latency: time.Millisecond}} {
				probeHotPath(ctx, obs, out) // first probe of the target
				if n := testing.AllocsPerRun(1000, func() { probeHotPath(ctx, obs, out) }); n != 0 {
					t.Errorf("%v allocations per probe (result %v), want 0", n, out.Result)
				}
			}
		})
	}
}

// BenchmarkProbeDone measures the observer's cost per probe as the engine
// pays it (ProbeStarted + ProbeDone of an HTTP probe with phases).
func BenchmarkProbeDone(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  telemetry.Config
	}{
		{"metrics", telemetry.Config{Prometheus: true}},
		{"metrics+target_label", telemetry.Config{Prometheus: true, TargetLabel: true}},
		{"metrics+trace_ratio_0.01", telemetry.Config{Prometheus: true, TraceRatio: 0.01}},
		{"metrics+debug_log", telemetry.Config{Prometheus: true, Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.cfg.Logger == nil {
				bc.cfg.Logger = infoLogger()
			}
			tel, err := telemetry.New(context.Background(), bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			obs := tel.Observer()
			ctx := context.Background()
			b.ReportAllocs()
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					probeHotPath(ctx, obs, httpOutcome)
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						probeHotPath(ctx, obs, httpOutcome)
					}
				})
			})
		})
	}
}

// BenchmarkScrape measures one Prometheus scrape of a Telemetry that has
// seen every probe type and result: what --metrics-addr costs per scrape.
func BenchmarkScrape(b *testing.B) {
	tel, err := telemetry.New(context.Background(), telemetry.Config{Prometheus: true, Logger: infoLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	var st engine.Stats
	st.Wheel.Lateness.Counts[0], st.Wheel.Lateness.Counts[8] = 1, 1
	if err := tel.Observe(func() engine.Stats { return st }); err != nil {
		b.Fatal(err)
	}
	obs := tel.Observer()
	for _, typ := range probe.Types {
		for _, res := range []probe.Result{probe.Success, probe.Failure, probe.Unknown} {
			obs.ProbeDone(context.Background(), "web", typ, probe.Outcome{Result: res, Latency: time.Millisecond, Phases: httpOutcome.Phases})
		}
	}
	h := tel.Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
