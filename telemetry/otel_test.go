package telemetry_test

import (
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/internal/probedtest"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/telemetry"
)

// manualReader returns a Config.Reader building a ManualReader, and the
// reader once built.
func manualReader() (build func(sdkmetric.Producer) sdkmetric.Reader, reader func() *sdkmetric.ManualReader) {
	var r *sdkmetric.ManualReader
	return func(p sdkmetric.Producer) sdkmetric.Reader {
			r = sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
			return r
		}, func() *sdkmetric.ManualReader {
			return r
		}
}

// runWeb creates a target "web" whose readiness GETs path on b, and
// waits until it has run n times.
func runWeb(t *testing.T, c probev1.ProbeServiceClient, b *probedtest.Backend, path string, n uint64) {
	t.Helper()
	if _, err := c.CreateTarget(t.Context(), &probev1.CreateTargetRequest{Target: &probev1.Target{Name: "web", ReadinessProbe: httpProbe(b, path)}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "web", func(tg *probev1.Target) bool { return tg.GetStatus().GetReadiness().GetProbesTotal() >= n })
}

// TestMetricsThroughAReader collects the metrics with the SDK's
// ManualReader, as an OTLP exporter would receive them.
func TestMetricsThroughAReader(t *testing.T) {
	build, reader := manualReader()
	tel := newTelemetry(t, telemetry.Config{Reader: build})
	s := startProbed(t, tel)
	runWeb(t, probev1.NewProbeServiceClient(s.Conn), probedtest.NewBackend(t, true), "/healthz", 3)

	var rm metricdata.ResourceMetrics
	if err := reader().Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	probes, ok := got[telemetry.MetricProbes].(metricdata.Sum[int64])
	if !ok || !probes.IsMonotonic {
		t.Fatalf("%s = %T, want a monotonic Sum[int64]", telemetry.MetricProbes, got[telemetry.MetricProbes])
	}
	want := attribute.NewSet(attribute.String("probe_type", "Readiness"), attribute.String("result", "successful"))
	var n int64
	for _, dp := range probes.DataPoints {
		if dp.Attributes.Equals(&want) {
			n = dp.Value
		}
	}
	if n < 3 {
		t.Errorf("%s{Readiness,successful} = %d, want at least 3", telemetry.MetricProbes, n)
	}
	for name, check := range map[string]func(metricdata.Aggregation) bool{
		telemetry.MetricProbeDuration:     histCount(1),
		telemetry.MetricReadinessLatency:  histCount(1),
		telemetry.MetricSchedulerLateness: histCount(1), // from the producer
		telemetry.MetricCommit:            histCount(1),
		telemetry.MetricTargets: func(a metricdata.Aggregation) bool {
			g, ok := a.(metricdata.Gauge[int64])
			return ok && len(g.DataPoints) == 2
		},
	} {
		if !check(got[name]) {
			t.Errorf("%s = %+v", name, got[name])
		}
	}
}

func histCount(min uint64) func(metricdata.Aggregation) bool {
	return func(a metricdata.Aggregation) bool {
		h, ok := a.(metricdata.Histogram[float64])
		if !ok || len(h.DataPoints) == 0 {
			return false
		}
		var n uint64
		for _, dp := range h.DataPoints {
			n += dp.Count
		}
		return n >= min
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func probeSpans(rec *tracetest.SpanRecorder) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "probe ") {
			out = append(out, s)
		}
	}
	return out
}

// TestProbeSpans checks the span of a sampled probe execution, failed and
// successful, and the span of a gRPC call.
func TestProbeSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tel := newTelemetry(t, telemetry.Config{TraceRatio: 1, SpanProcessors: []sdktrace.SpanProcessor{rec}})
	s := startProbed(t, tel)
	b := probedtest.NewBackend(t, false)
	runWeb(t, probev1.NewProbeServiceClient(s.Conn), b, "/healthz", 2)
	b.SetHealthy(true)
	waitFor(t, probev1.NewProbeServiceClient(s.Conn), "web", func(tg *probev1.Target) bool { return tg.GetStatus().GetReady() })

	var failed, passed sdktrace.ReadOnlySpan
	for _, sp := range probeSpans(rec) {
		a := attrs(sp)
		if sp.Name() != "probe readiness" || a[telemetry.AttrTarget].AsString() != "web" || a[telemetry.AttrProbeType].AsString() != "readiness" {
			t.Errorf("span %q with attributes %v, want probe readiness of web", sp.Name(), a)
		}
		switch a[telemetry.AttrProbeResult].AsString() {
		case "failure":
			failed = sp
		case "success":
			passed = sp
		}
	}
	if failed == nil || passed == nil {
		t.Fatalf("want a failed and a passed probe span, got %d probe spans", len(probeSpans(rec)))
	}
	if a := attrs(failed); !strings.Contains(a[telemetry.AttrProbeMessage].AsString(), "503") || failed.Status().Code != codes.Error {
		t.Errorf("failed span: message %q, status %v; want the 503 and an error status", a[telemetry.AttrProbeMessage].AsString(), failed.Status())
	}
	if a := attrs(passed); a[telemetry.AttrPhaseFirstByte].AsFloat64() <= 0 || passed.Status().Code == codes.Error {
		t.Errorf("passed span: attributes %v, status %v; want a first-byte phase and no error", a, passed.Status())
	}
	if passed.SpanKind() != trace.SpanKindClient {
		t.Errorf("span kind %v, want client", passed.SpanKind())
	}
	var rpc bool
	for _, sp := range rec.Ended() {
		rpc = rpc || sp.Name() == "probe.v1.ProbeService/CreateTarget"
	}
	if !rpc {
		t.Error("no span of the CreateTarget call (otelgrpc)")
	}
}

// TestNoProbeSpansWithRatioZero checks that a zero ratio makes no probe
// span and leaves the probe's context alone.
func TestNoProbeSpansWithRatioZero(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tel := newTelemetry(t, telemetry.Config{SpanProcessors: []sdktrace.SpanProcessor{rec}})
	ctx := t.Context()
	if got := tel.Observer().ProbeStarted(ctx, "web", probe.Readiness); got != ctx {
		t.Error("ProbeStarted returned a new context with tracing off")
	}
	s := startProbed(t, tel)
	runWeb(t, probev1.NewProbeServiceClient(s.Conn), probedtest.NewBackend(t, true), "/healthz", 3)
	if n := len(probeSpans(rec)); n != 0 {
		t.Errorf("%d probe spans with ratio 0, want none", n)
	}
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-[0-9a-f]{16}-(0[01])$`)

// TestTracePropagation checks the traceparent HTTP targets see.
func TestTracePropagation(t *testing.T) {
	tests := []struct {
		name      string
		ratio     float64
		propagate bool
		wantFlags string // "" : no header
	}{
		{name: "propagated and sampled", ratio: 1, propagate: true, wantFlags: "01"},
		{name: "propagated, not sampled", ratio: 0, propagate: true, wantFlags: "00"},
		{name: "sampled, not propagated", ratio: 1},
		{name: "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tel := newTelemetry(t, telemetry.Config{TraceRatio: tt.ratio, Propagate: tt.propagate, SpanProcessors: []sdktrace.SpanProcessor{rec}})
			if (tel.Inject() != nil) != tt.propagate {
				t.Errorf("Inject() = nil: %v, want a function: %v", tel.Inject() == nil, tt.propagate)
			}
			s := startProbed(t, tel)
			b := probedtest.NewBackend(t, true)
			runWeb(t, probev1.NewProbeServiceClient(s.Conn), b, "/healthz", 2)
			n, got := b.Requests("Traceparent")
			if n == 0 {
				t.Fatal("the backend saw no request")
			}
			if tt.wantFlags == "" {
				if got != "" {
					t.Errorf("traceparent %q, want none", got)
				}
				return
			}
			m := traceparentRE.FindStringSubmatch(got)
			if m == nil || m[2] != tt.wantFlags {
				t.Fatalf("traceparent %q, want a W3C one with flags %s", got, tt.wantFlags)
			}
			if tt.wantFlags != "01" {
				return
			}
			var found bool
			for _, sp := range probeSpans(rec) {
				found = found || sp.SpanContext().TraceID().String() == m[1]
			}
			if !found {
				t.Errorf("trace %s of the traceparent is no recorded probe span's", m[1])
			}
		})
	}
}

// collector is a fake OTLP collector over gRPC.
type collector struct {
	collmetrics.UnimplementedMetricsServiceServer

	mu      sync.Mutex
	metrics map[string]bool // metric names received; guarded by mu
	spans   map[string]bool // span names received; guarded by mu
}

func (c *collector) Export(_ context.Context, req *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				c.metrics[m.GetName()] = true
			}
		}
	}
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

// traceService adapts the collector to the trace service, whose method is
// also named Export.
type traceService struct {
	colltrace.UnimplementedTraceServiceServer
	c *collector
}

func (s traceService) Export(_ context.Context, req *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.c.spans[sp.GetName()] = true
			}
		}
	}
	return &colltrace.ExportTraceServiceResponse{}, nil
}

// TestOTLPExport sets the standard OTLP variables to a fake collector and
// checks that Shutdown flushes metrics and probe spans to it over gRPC.
func TestOTLPExport(t *testing.T) {
	coll := &collector{metrics: map[string]bool{}, spans: map[string]bool{}}
	g := grpc.NewServer()
	collmetrics.RegisterMetricsServiceServer(g, coll)
	colltrace.RegisterTraceServiceServer(g, traceService{c: coll})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000") // only Shutdown exports
	tel := newTelemetry(t, telemetry.Config{TraceRatio: 1})
	s := startProbed(t, tel)
	runWeb(t, probev1.NewProbeServiceClient(s.Conn), probedtest.NewBackend(t, true), "/healthz", 2)
	s.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	coll.mu.Lock()
	defer coll.mu.Unlock()
	for _, name := range []string{telemetry.MetricProbes, telemetry.MetricProbeDuration, telemetry.MetricSchedulerLateness, telemetry.MetricTargets} {
		if !coll.metrics[name] {
			t.Errorf("the collector received no %s; got %v", name, coll.metrics)
		}
	}
	if !coll.spans["probe readiness"] {
		t.Errorf("the collector received no probe span; got %v", coll.spans)
	}
}

// TestOTLPProtocol checks that an OTLP protocol other than grpc is refused
// by name.
func TestOTLPProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	_, err := telemetry.New(t.Context(), telemetry.Config{})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf") {
		t.Fatalf("New = %v, want an error naming the protocol variable", err)
	}
}
